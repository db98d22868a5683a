"""What other tools export, read into plain records (docs/design.md, "Import and export").

- ChatGPT's `conversations.json`: a JSON array of conversations, each a tree of nodes in `mapping`
  (node id -> {message, parent, children}); what the user saw is the path from the root to
  `current_node` (edits and regenerations are side branches). Messages carry `author.role`,
  `create_time` (Unix seconds), `content` (`content_type` text or multimodal_text with `parts`),
  `metadata` and `recipient`.
- Claude's `conversations.json`: a JSON array of conversations (`uuid`, `name`, `created_at`,
  `chat_messages`), each message with `uuid`, `sender` (human or assistant), `created_at` and its
  text in `text` or in the `text` items of `content`.
- A folder of markdown notes (Obsidian, basic-memory, plain notes).
- memvault's own JSON lines (`memvault export`).

Readers stream: one conversation (or note, or line) at a time, so memory is bounded by the largest
one. They yield records and `Problem`s (what is wrong, where, and whether reading went on); they
never write anything. Turning records into memories is importing.py's business.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from memvault.store import files
from memvault.errors import MemvaultError
from memvault.moving.jsonstream import JSONStreamError, iter_array

Progress = Callable[[int, int], None]


@dataclass
class Problem:
    """Something left out: `where` names the file and the conversation (or line, or note),
    `reason` says what is wrong. fatal: nothing after it could be read."""

    where: str
    reason: str
    fatal: bool = False

    def __str__(self) -> str:
        # A fatal problem is about the whole file: "conversations.json is cut short ...".
        return f"{self.where} {self.reason}" if self.fatal else f"{self.where}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "reason": self.reason, "fatal": self.fatal}


@dataclass
class Message:
    role: str  # user or assistant
    text: str
    created_at: datetime
    original_id: str | None


@dataclass
class Conversation:
    """One conversation of a chat export, its messages in the order the user saw them."""

    original_id: str
    title: str
    messages: list[Message]
    where: str  # for problems: the file and the conversation
    problems: list[Problem] = field(default_factory=list)  # messages left out


@dataclass
class Note:
    """One markdown file of a folder of notes."""

    relative_path: str
    text: str
    title: str
    front_matter: dict[str, Any]
    tags: list[str]
    links: list[str]
    created_at: datetime


@dataclass
class Line:
    """One memory of a memvault export: the JSON object of its line."""

    number: int
    item: dict[str, Any]
    where: str


# -- chat exports ------------------------------------------------------------------------------

# ChatGPT content that is no message the user read: model reasoning, the custom instructions.
_CHATGPT_HIDDEN_CONTENT = {"thoughts", "reasoning_recap", "user_editable_context", "model_editable_context"}


def chatgpt_conversations(path: Path, progress: Progress | None = None) -> Iterator[Conversation | Problem]:
    """The conversations of a ChatGPT data export's conversations.json."""
    for number, item in _conversations(path, "ChatGPT", progress):
        if isinstance(item, Problem):
            yield item
            continue
        if not isinstance(item, dict) or not isinstance(item.get("mapping"), dict):
            problem = Problem(f"{path.name}, conversation {number}", "has no 'mapping' of messages: not a ChatGPT "
                                                                    "conversation")
            if number == 1:  # the first one decides whether this is the named format at all
                yield _wrong_format(path, item, "ChatGPT", "mapping")
                return
            yield problem
            continue
        yield _chatgpt_conversation(path, number, item)


def _chatgpt_conversation(path: Path, number: int, item: dict) -> Conversation | Problem:
    original_id = str(item.get("conversation_id") or item.get("id") or "")
    title = _title(item.get("title"))
    where = _where(path, number, title, original_id)
    if not original_id:
        return Problem(where, "has no 'id'")
    mapping = item["mapping"]
    try:
        chain = _chatgpt_path(mapping, item.get("current_node"))
    except ValueError as exc:
        return Problem(where, f"broken node tree: {exc}")
    start = _unix_time(item.get("create_time")) or _unix_time(item.get("update_time"))
    conversation = Conversation(original_id, title, [], where)
    clock = start
    for node_id, node in chain:
        message = node.get("message")
        if not isinstance(message, dict):
            continue  # the root, or a node whose message was removed
        author = message.get("author") if isinstance(message.get("author"), dict) else {}
        role = author.get("role")
        metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
        content = message.get("content") if isinstance(message.get("content"), dict) else {}
        if role not in ("user", "assistant") or metadata.get("is_visually_hidden_from_conversation") \
                or metadata.get("is_user_system_message") or content.get("content_type") in _CHATGPT_HIDDEN_CONTENT:
            continue  # system and tool messages, hidden ones: never shown to the user
        if role == "assistant" and message.get("recipient", "all") != "all":
            continue  # a call to a tool (browser, python, dalle), not a reply
        message_id = str(message.get("id") or node_id)
        moment = _unix_time(message.get("create_time"))
        clock = moment or (clock + timedelta(microseconds=1) if clock else None)
        text = _chatgpt_text(content)
        if not text:
            kind = content.get("content_type") or "no content"
            conversation.problems.append(Problem(where, f"message {message_id} ({role}) has no text ({kind}); "
                                                        "left out"))
            continue
        if clock is None:
            return Problem(where, "has no time: neither the conversation nor its first message has a create_time")
        conversation.messages.append(Message(role, text, clock, message_id))
    return conversation


def _chatgpt_path(mapping: dict, current: Any) -> list[tuple[str, dict]]:
    """The nodes from the root to `current_node` (without one: to the newest leaf), root first."""
    if current is None:
        current = _newest_leaf(mapping)
        if current is None:
            return []
    chain: list[tuple[str, dict]] = []
    seen: set[str] = set()
    node_id = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            named = "current_node" if not chain else f"node {chain[-1][0]}'s parent"
            raise ValueError(f"{named} {node_id!r} is not in 'mapping'")
        if node_id in seen:
            raise ValueError(f"node {node_id} is its own ancestor (a cycle)")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise ValueError(f"node {node_id} is not an object")
        chain.append((node_id, node))
        node_id = node.get("parent")
    chain.reverse()
    return chain


def _newest_leaf(mapping: dict) -> str | None:
    best, best_time = None, None
    for node_id, node in mapping.items():
        if not isinstance(node, dict) or node.get("children"):
            continue
        message = node.get("message") if isinstance(node.get("message"), dict) else {}
        moment = message.get("create_time") if isinstance(message.get("create_time"), (int, float)) else 0
        if best is None or moment > best_time:
            best, best_time = node_id, moment
    return best


def _chatgpt_text(content: dict) -> str:
    if isinstance(content.get("parts"), list):
        pieces = []
        for part in content["parts"]:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):  # an audio transcription
                pieces.append(part["text"])
        return "\n".join(p for p in pieces if p.strip()).strip()
    if isinstance(content.get("text"), str):  # code, quotes
        return content["text"].strip()
    return ""


def claude_conversations(path: Path, progress: Progress | None = None) -> Iterator[Conversation | Problem]:
    """The conversations of a Claude data export's conversations.json."""
    for number, item in _conversations(path, "Claude", progress):
        if isinstance(item, Problem):
            yield item
            continue
        if not isinstance(item, dict) or not isinstance(item.get("chat_messages"), list):
            if number == 1:
                yield _wrong_format(path, item, "Claude", "chat_messages")
                return
            yield Problem(f"{path.name}, conversation {number}", "has no list of 'chat_messages': not a Claude "
                                                                 "conversation")
            continue
        yield _claude_conversation(path, number, item)


def _claude_conversation(path: Path, number: int, item: dict) -> Conversation | Problem:
    original_id = str(item.get("uuid") or "")
    title = _title(item.get("name"))
    where = _where(path, number, title, original_id)
    if not original_id:
        return Problem(where, "has no 'uuid'")
    clock = _iso_time(item.get("created_at")) or _iso_time(item.get("updated_at"))
    conversation = Conversation(original_id, title, [], where)
    for position, message in enumerate(item["chat_messages"], 1):
        if not isinstance(message, dict):
            conversation.problems.append(Problem(where, f"message {position} is not an object; left out"))
            continue
        role = {"human": "user", "user": "user", "assistant": "assistant"}.get(message.get("sender"))
        if role is None:
            continue
        message_id = str(message.get("uuid") or f"#{position}")
        moment = _iso_time(message.get("created_at"))
        clock = moment or (clock + timedelta(microseconds=1) if clock else None)
        text = _claude_text(message)
        if not text:
            conversation.problems.append(Problem(where, f"message {message_id} ({role}) has no text; left out"))
            continue
        if clock is None:
            return Problem(where, "has no time: neither the conversation nor its first message has a created_at")
        conversation.messages.append(Message(role, text, clock, message_id))
    return conversation


def _claude_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        pieces = [c["text"] for c in content
                  if isinstance(c, dict) and c.get("type", "text") == "text" and isinstance(c.get("text"), str)]
        text = "\n\n".join(p for p in pieces if p.strip()).strip()
        if text:
            return text
    return message["text"].strip() if isinstance(message.get("text"), str) else ""


def _conversations(path: Path, product: str, progress: Progress | None) -> Iterator[tuple[int, Any]]:
    """(number, conversation) from the JSON array, then a fatal Problem if the file is not one,
    is cut short or is not valid JSON."""
    number = 0
    try:
        for number, item in enumerate(iter_array(path, progress), 1):
            yield number, item
    except JSONStreamError as exc:
        after = f"; the {exc.count} conversation{'s' if exc.count != 1 else ''} before it were read" if exc.count else ""
        hint = f": not a {product} export (its conversations.json is an array of conversations)" \
            if exc.kind in ("not-array", "not-json") else ""
        yield number + 1, Problem(path.name, f"{exc.detail}{hint}{after}", fatal=True)
    except OSError as exc:
        raise MemvaultError(f"cannot read {path}: {exc.strerror or exc}") from None


def _wrong_format(path: Path, item: Any, product: str, key: str) -> Problem:
    hint = ""
    if isinstance(item, dict) and "chat_messages" in item:
        hint = f" (it looks like a Claude export: `memvault import claude {shlex.quote(str(path))}`)"
    elif isinstance(item, dict) and "mapping" in item:
        hint = f" (it looks like a ChatGPT export: `memvault import chatgpt {shlex.quote(str(path))}`)"
    return Problem(path.name, f"is not a {product} export: its first conversation has no '{key}'{hint}", fatal=True)


def _where(path: Path, number: int, title: str, original_id: str) -> str:
    return f"{path.name}, conversation {number} {json.dumps(title, ensure_ascii=False)}" + \
        (f" ({original_id})" if original_id else "")


def _title(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) and value.strip() else "Untitled"


def _unix_time(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(value, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def _iso_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return files.parse_time(value)
    except ValueError:
        return None


# -- markdown notes ----------------------------------------------------------------------------

_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.M)
_WIKILINK = re.compile(r"\[\[([^\]|#\n]+)(?:#[^\]|\n]*)?(?:\|[^\]\n]*)?\]\]")
_TAG = re.compile(r"(?:^|(?<=\s))#([A-Za-z0-9_][\w/-]*)", re.U)
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# Folders of tools, not of notes.
_SKIP_FOLDERS = {".obsidian", ".git", ".trash", ".memvault", "node_modules"}


def markdown_notes(folder: Path, progress: Progress | None = None) -> Iterator[Note | Problem]:
    """Every .md file under `folder` (sorted; hidden folders and symbolic links left alone)."""
    paths = _markdown_files(folder)
    for done, path in enumerate(paths, 1):
        relative = path.relative_to(folder).as_posix()
        try:
            yield _note(path, relative)
        except _NoteProblem as exc:
            yield Problem(f"{folder.name}/{relative}", str(exc))
        if progress is not None:
            progress(done, len(paths))


class _NoteProblem(Exception):
    pass


def _markdown_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for here, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_FOLDERS)
        for name in names:
            path = Path(here) / name
            if name.lower().endswith(".md") and not name.startswith(".") and not path.is_symlink():
                found.append(path)
    return sorted(found)


def _note(path: Path, relative: str) -> Note:
    try:
        stat = path.stat()
        if stat.st_size > files.MAX_MEMORY_BYTES:
            raise _NoteProblem(f"is {stat.st_size / 1048576:.1f} MiB; the limit is "
                               f"{files.MAX_MEMORY_BYTES // 1048576} MiB per memory")
        raw = path.read_bytes()
    except OSError as exc:
        raise _NoteProblem(f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise _NoteProblem(f"is not UTF-8 text (byte {exc.start})") from None
    meta, body = _split_front_matter(text)
    body = body.strip()
    if not body:
        raise _NoteProblem("has no text")
    heading = _HEADING.search(body)
    title = str(meta.get("title") or (heading.group(1).strip() if heading else Path(relative).stem))
    prose = _FENCE.sub("", body)  # tags and links inside code blocks are code
    tags = _note_tags(meta.get("tags")) + [t for t in _TAG.findall(prose)]
    links = [m.strip() for m in _WIKILINK.findall(prose)]
    created = _front_matter_time(meta) or datetime.fromtimestamp(stat.st_mtime, timezone.utc)
    return Note(relative, body, title, meta, _unique(tags), _unique(links), created)


def _split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise _NoteProblem("front matter starts with '---' but has no closing '---'")
    import yaml

    try:
        meta = files.load_front_matter("".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise _NoteProblem(f"front matter is not valid YAML{f' at line {mark.line + 2}' if mark else ''}") from None
    if not isinstance(meta, dict):
        raise _NoteProblem("front matter is not a mapping of keys")
    return {str(k): v for k, v in meta.items()}, "".join(lines[end + 1:])


def _note_tags(value: Any) -> list[str]:
    if isinstance(value, str):
        value = re.split(r"[,\s]+", value)
    if not isinstance(value, list):
        return []
    return [str(t).lstrip("#").strip() for t in value if str(t).strip().lstrip("#")]


def _front_matter_time(meta: dict[str, Any]) -> datetime | None:
    for key in ("created_at", "created", "date"):
        if meta.get(key) not in (None, ""):
            try:
                return files.parse_time(meta[key])
            except ValueError:
                continue
    return None


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


# -- memvault's own JSON lines -------------------------------------------------------------------

def jsonl_lines(path: Path, progress: Progress | None = None) -> Iterator[Line | Problem]:
    """One record per non-empty line of a `memvault export`, read a line at a time."""
    try:
        size = path.stat().st_size
        handle = open(path, "rb")
    except OSError as exc:
        raise MemvaultError(f"cannot read {path}: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            where = f"{path.name} line {number}"
            if not raw.strip():
                continue
            try:
                item = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield Problem(where, f"is not UTF-8 text (byte {exc.start})")
                continue
            except json.JSONDecodeError as exc:
                if number == 1:
                    yield Problem(path.name, f"is not a memvault export (line 1 is not JSON: {exc.msg})", fatal=True)
                    return
                cut = not raw.endswith(b"\n")
                yield Problem(where, "is cut short (the file ends inside it)" if cut else f"is not valid JSON ({exc.msg})")
                continue
            if not isinstance(item, dict) or not {"id", "role", "text"} <= set(item):
                if number == 1:
                    yield Problem(path.name, "is not a memvault export (line 1 is not an object with id, role and "
                                             "text)", fatal=True)
                    return
                yield Problem(where, "is not a memory (an object with id, role and text)")
                continue
            yield Line(number, item, where)
            if progress is not None:
                progress(handle.tell(), size)
