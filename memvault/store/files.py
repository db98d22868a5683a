"""Memory files: markdown with YAML front matter, laid out as docs/design.md "The vault on disk" says.

This module knows the on-disk format and nothing else: no git, no index. Files are read
and written through python-frontmatter (`loads` gives a `Post`, `dumps` writes one) with a
handler of memvault's own (`handler()`: libyaml where it matches PyYAML, the exact layout).
Writes are atomic (temp file in the same folder, fsync, rename) so a kill at any
moment leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import tempfile
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from memvault import request_options
from memvault.errors import InvalidConversationId, MemoryFileError, UsageError

ENTRIES = "entries"
DELETED = "deleted"
DEFAULT_CONVERSATION = "global"
# One memory is at most this big; longer text would be cut by the embedder anyway.
MAX_MEMORY_BYTES = 1024 * 1024

ROLE_FOLDERS = {
    "memory": "facts",
    "note": "notes",
    "decision": "decisions",
    "user": "turns/user",
    "assistant": "turns/assistant",
    "summary": "summaries",
    "episode": "episodes",  # what happened in a stretch of a conversation (docs/design.md, "Episodes")
    "pending": "pending",  # a learned fact waiting for review (setting learned_review): never searched
}
PENDING_ROLE = "pending"
# The folders directly under a conversation's that hold memories (turns/ holds user/ and assistant/).
KIND_FOLDERS = frozenset(folder.split("/")[0] for folder in ROLE_FOLDERS.values())
KIND_TO_ROLE = {"fact": "memory", "note": "note", "decision": "decision"}
KIND_ROLES = {**{kind: (role,) for kind, role in KIND_TO_ROLE.items()}, "turn": ("user", "assistant"),
              "episode": ("episode",)}
ROLE_TO_KIND = {role: kind for kind, role in KIND_TO_ROLE.items()}
# What `search --kind` and `ls --kind` accept: the kinds above, plus turns (both roles).
# The kind names are request_options.SEARCH_KINDS (the one list every face offers); here, their roles.
SEARCH_KINDS = {kind: KIND_ROLES[kind] for kind in request_options.SEARCH_KINDS}


def kind_of_role(role: str) -> str:
    """The user's word for a role: fact, note, decision, turn (user, assistant), summary."""
    return ROLE_TO_KIND.get(role) or ("turn" if role in ("user", "assistant") else role)


def roles_for_kinds(kinds) -> tuple[str, ...] | None:
    """The roles of some kinds (None for none given); an unknown kind is a usage error."""
    roles: list[str] = []
    for kind in kinds or ():
        if kind not in SEARCH_KINDS:
            raise UsageError(f"unknown kind {kind!r} (one of {', '.join(SEARCH_KINDS)})")
        roles += [r for r in SEARCH_KINDS[kind] if r not in roles]
    return tuple(roles) or None
DELETE_REASONS = ("update", "contradiction", "evicted", "user", "rejected")  # rejected: in `memvault review`
# Front-matter key of a tombstone: why the user removed it, in their own words (`deleted_reason`
# stays one of DELETE_REASONS, which code reads; this is for people).
DELETED_NOTE = "deleted_note"
# A deleted_note longer than this is refused: it is a reason, not a memory.
MAX_NOTE_CHARS = 2000
# Front-matter keys the product itself manages; anything else is the user's and is kept as is.
CORE_KEYS = ("id", "role", "conversation_id", "created_at")

# Stable namespace so an adopted file gets the same id in every process.
ADOPT_NAMESPACE = uuid.UUID("8a0f5a53-7c1e-4c53-9f0e-6f3b1f7c2d10")

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def option_time(value: Any, name: str) -> datetime | None:
    """An ISO 8601 option of a library call as an aware datetime (naive: UTC; None stays None); a bad
    one is a UsageError naming the parameter."""
    if value is None:
        return None
    try:
        return parse_time(value, name)
    except ValueError as exc:
        raise UsageError(str(exc), params=name) from None


def parse_time(value: Any, what: str = "time") -> datetime:
    """ISO 8601 (or a YAML datetime) -> aware datetime; naive times are read as UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{what} {value!r} is not an ISO 8601 date-time") from None
    elif hasattr(value, "year") and hasattr(value, "month") and hasattr(value, "day"):
        moment = datetime(value.year, value.month, value.day)
    else:
        raise ValueError(f"{what} {value!r} is not an ISO 8601 date-time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment


def format_time(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


def file_stamp(moment: datetime) -> str:
    """UTC YYYYMMDDTHHMMSSffffffZ, so file names sort by time: the year has four digits, 0999 too
    (strftime's %Y gives 999, which sorted after 2026 and read as no time at all)."""
    utc = moment.astimezone(timezone.utc)
    return f"{utc.year:04d}{utc:%m%dT%H%M%S%fZ}"


def check_conversation_id(conversation_id: str) -> str:
    """Refuse ids that are clearly not names: empty, path traversal, NUL or control characters."""
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        raise InvalidConversationId("conversation id must not be empty")
    if _CONTROL.search(conversation_id):
        raise InvalidConversationId(
            f"conversation id {conversation_id!r} contains NUL or control characters"
        )
    if any(part in (".", "..") for part in re.split(r"[/\\]", conversation_id)):
        raise InvalidConversationId(
            f"conversation id {conversation_id!r} contains a '.' or '..' path component"
        )
    return conversation_id


def conversation_slug(conversation_id: str) -> str:
    """A folder name for a conversation id that can never leave entries/.

    Plain ids (letters, digits, . _ -) are used as they are. Anything else keeps a
    readable ASCII prefix plus a hash of the full id, so 'a/b' and 'a-b' differ.
    The original id is always kept in the front matter.
    """
    check_conversation_id(conversation_id)
    if _SAFE_ID.match(conversation_id):
        return conversation_id
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", conversation_id).strip("-._")[:48] or "c"
    digest = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{readable}-{digest}"


@dataclass
class Memory:
    id: str
    role: str
    conversation_id: str
    created_at: datetime
    text: str
    extra: dict[str, Any] = field(default_factory=dict)  # every other front-matter key, in order
    path: Path | None = None  # absolute path once written or read
    # A view of the memory as the vault held it at this moment (as_held, `--as-of`): live then,
    # although its file may be a tombstone now (deleted at `deleted_since`).
    as_of: datetime | None = field(default=None, compare=False)
    deleted_since: str | None = field(default=None, compare=False)
    # ... edited after that moment (its `updated_at` now): the text is the one of then, found in the
    # history, or (edited_text_of "now") today's, the one of then not found (reading/as_of.py).
    edited_since: str | None = field(default=None, compare=False)
    edited_text_of: str | None = field(default=None, compare=False)

    @property
    def tags(self) -> list[str]:
        tags = self.extra.get("tags") or []
        return [str(t) for t in tags] if isinstance(tags, list) else [str(tags)]

    @property
    def is_deleted(self) -> bool:
        """A tombstone: entries/<conversation>/deleted/... (a conversation may be named "deleted");
        never in a view as of a moment it was held (as_held)."""
        if self.path is None or self.as_of is not None:
            return False
        parts = self.path.parts
        return any(parts[i] == ENTRIES and parts[i + 2] == DELETED for i in range(len(parts) - 3))

    def front_matter(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "conversation_id": self.conversation_id,
            "created_at": format_time(self.created_at),
        }
        for key, value in self.extra.items():
            if key not in meta:
                meta[key] = value  # a YAML date or timestamp stays one (memvault's own times are strings)
        return meta

    @property
    def kind(self) -> str:
        """The user's word for the role: fact, note, decision, turn, summary."""
        return kind_of_role(self.role)

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        """The memory as `--json` prints it: core keys, text, the other front matter under meta."""
        return {
            "id": self.id,
            "path": (self.path.relative_to(root).as_posix() if root else str(self.path)) if self.path else None,
            "role": self.role,
            "kind": self.kind,
            "conversation_id": self.conversation_id,
            "created_at": format_time(self.created_at),
            "text": self.text,
            "meta": json_safe(self.extra),
            "deleted": self.is_deleted,
            **({"as_of": format_time(self.as_of), "deleted_since": self.deleted_since} if self.as_of else {}),
            **({"edited_since": self.edited_since, "text_of": self.edited_text_of} if self.edited_since else {}),
        }

    def date_paths(self) -> list[list[Any]]:
        """Where the front matter holds YAML dates or timestamps (key paths into `extra`): `export` lists
        them, so that `import jsonl` writes them back as dates, not as the strings JSON carried."""
        found: list[list[Any]] = []

        def walk(value: Any, where: list[Any]) -> None:
            if isinstance(value, (datetime, date)):
                found.append(where)
            elif isinstance(value, dict):
                for key, item in value.items():
                    walk(item, [*where, key])
            elif isinstance(value, list):
                for number, item in enumerate(value):
                    walk(item, [*where, number])

        walk(self.extra, [])
        return found

    def first_line(self, width: int = 80) -> str:
        line = next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")
        return line if len(line) <= width else line[: width - 1] + "…"


def new_memory(
    text: str,
    role: str = "memory",
    conversation_id: str = DEFAULT_CONVERSATION,
    created_at: datetime | None = None,
    extra: dict[str, Any] | None = None,
) -> Memory:
    if role not in ROLE_FOLDERS:
        raise UsageError(f"unknown role {role!r} (one of {', '.join(ROLE_FOLDERS)})")
    check_conversation_id(conversation_id)
    text = text.strip()
    if not text:
        raise UsageError("memory text is empty")
    check_text(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_MEMORY_BYTES:
        raise UsageError(
            f"memory text is {size / 1048576:.1f} MiB; the limit is {MAX_MEMORY_BYTES // 1048576} MiB "
            "per memory (split it: one memory per line, for instance)"
        )
    return Memory(
        id=str(uuid.uuid4()),
        role=role,
        conversation_id=conversation_id,
        created_at=created_at or utcnow(),
        text=text,
        extra=dict(extra or {}),
    )


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_text(text: str, what: str = "memory text") -> None:
    """Refuse text that would make a file no reader can open again: a NUL byte (the file reads as
    binary) or a lone surrogate (bytes that were not UTF-8, passed through by the shell)."""
    bad = _UNSTORABLE.search(text)
    if bad is None:
        return
    where = f"at character {bad.start() + 1}"
    if bad.group() == "\x00":
        raise UsageError(f"{what} contains a NUL byte ({where}); memvault stores text, not binary data")
    raise UsageError(f"{what} is not valid UTF-8 ({where})")


# How a memory came into the vault, when memvault wrote it without being asked to store those
# words: "chat" (a turn of `memvault chat` or `serve`), "learned" (a fact extraction found),
# "import" (an imported history). No origin: the user added it (`add`, `edit`, a file).
ORIGIN_KEY = "origin"
# On a user turn: true once it has been learned from, false while learning is still owed to it (a
# chat whose upkeep did not run); no key: nothing was asked of it (docs/design.md, "The write path").
EXTRACTED = "extracted"
# On a learned fact the user looked over in `memvault review`: kept or edited.
REVIEWED = "reviewed"


def is_learned(memory: Memory) -> bool:
    """A fact memvault learned (origin learned), live or waiting for review, kept in review or not."""
    return memory.role in ("memory", PENDING_ROLE) and memory.extra.get(ORIGIN_KEY) == "learned"


def is_evictable(memory: Memory) -> bool:
    """Eviction (max_entries) only takes what memvault wrote itself: chat turns and learned facts.
    Turns from before origins were recorded could only come from chat."""
    origin = memory.extra.get(ORIGIN_KEY)
    if memory.role in ("user", "assistant"):
        return origin in (None, "chat")
    # A learned fact the user kept in review is theirs now.
    return memory.role == "memory" and origin == "learned" and not memory.extra.get(REVIEWED)


def render(memory: Memory) -> str:
    """The file's text: `---`, the front matter, `---`, the text (python-frontmatter's `dumps` of a
    `Post`, laid out by memvault's handler)."""
    import frontmatter

    post = frontmatter.Post(memory.text.strip(), handler())
    post.metadata = memory.front_matter()  # not Post(**meta): a key may be 'content' or 'handler'
    return frontmatter.dumps(post)


class FrontMatterProblem(Exception):
    """Why a header cannot be read as front matter; parse_memory names the file. Not a ValueError:
    python-frontmatter takes a ValueError from `split` to mean "no front matter" and goes on."""


_HANDLER = None


def handler():
    """python-frontmatter's YAML handler, made to keep memvault's files byte for byte: the header
    between a `---` line and the next `---` (or `...`) line, read and written by load_front_matter
    and dump_front_matter (libyaml where it gives exactly what PyYAML gives), and the layout
    `---\\n<yaml>---\\n<text>\\n` (the stock handler puts a blank line after the header and no
    newline at the end). Built on first use: `import frontmatter` costs ~10 ms."""
    global _HANDLER
    if _HANDLER is None:
        from frontmatter.default_handlers import YAMLHandler

        class MemvaultYAMLHandler(YAMLHandler):
            def split(self, text: str) -> tuple[str, str]:
                lines = text.splitlines(keepends=True)
                end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n").strip() in ("---", "...")),
                           None)
                if end is None:
                    raise FrontMatterProblem("front matter starts with '---' but has no closing '---'")
                return "".join(lines[1:end]), "".join(lines[end + 1:])

            def load(self, fm: str, **kwargs) -> dict[str, Any]:
                meta = load_front_matter(fm) if fm.strip() else {}
                if not isinstance(meta, dict):
                    raise FrontMatterProblem(f"front matter is a {type(meta).__name__}, not a mapping of keys")
                return meta

            def export(self, metadata: dict[str, Any], **kwargs) -> str:
                return dump_front_matter(metadata)

            def format(self, post, **kwargs) -> str:
                return f"---\n{self.export(post.metadata)}---\n{post.content}\n"

        _HANDLER = MemvaultYAMLHandler()
    return _HANDLER


# The first line as str.splitlines() cuts it (it also breaks at \v, \f, \x1c-\x1e, \x85, \u2028, \u2029).
_FIRST_LINE = re.compile("[^\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]*")


def loads(text: str):
    """A memory file's text as a python-frontmatter `Post` (metadata, content); FrontMatterProblem or a
    yaml.YAMLError when the header cannot be read."""
    import frontmatter

    if "\r\n" not in text:
        try:
            return frontmatter.loads(text, handler=handler())
        except TypeError:
            pass
    # frontmatter.loads turns \r\n into \n (a hand-written file's text would change under it), and
    # Post(content, handler, **metadata) takes no key that is not a string, nor one named 'content'
    # or 'handler': such files (rare) are split and read by the same handler, as they are.
    header, body = handler().split(text.strip())
    post = frontmatter.Post(body.strip(), handler())
    post.metadata = handler().load(header)
    return post


# Front matter goes through libyaml (PyYAML's C extension, 7x faster to read) where it gives
# exactly what the pure-Python classes give, which stay the reference and the fallback.
_YAML_WIDTH = 1000
# libyaml escapes these (\N, \U0001F642...) where PyYAML writes them as they are, or cannot write them.
_LIBYAML_ESCAPES = re.compile("[\x85\ud800-\udfff\U00010000-\U0010ffff]")
# What PyYAML's own parser refuses or reads otherwise than libyaml: tabs, a BOM inside the text,
# some plain scalars in flow collections ('[x?]', '[!,y]'), a comment glued to '|' or '>'.
_PYYAML_STRICTER = re.compile(r"[\t\ufeff\[{]|[|>][-+0-9]*#")


def dump_front_matter(meta: dict[str, Any]) -> str:
    """YAML for the front matter, key order kept; byte for byte what yaml.safe_dump writes."""
    import yaml

    options = dict(sort_keys=False, allow_unicode=True, default_flow_style=False, width=_YAML_WIDTH)
    fast = getattr(yaml, "CSafeDumper", None)
    if fast is not None and _libyaml_writes_alike(meta):
        text = yaml.dump(meta, Dumper=fast, **options)
        # The two fold a line past the width differently; short of it neither folds.
        if max(map(len, text.split("\n"))) < _YAML_WIDTH - 100:
            return text
    return yaml.dump(meta, Dumper=yaml.SafeDumper, **options)


def load_front_matter(header: str) -> Any:
    """What yaml.safe_load gives, the same value or the same error (message and line)."""
    import yaml

    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None and not _PYYAML_STRICTER.search(header):
        try:
            return yaml.load(header, Loader=fast)
        except yaml.YAMLError:
            pass  # rare (a broken file): PyYAML says why, in the words and line numbers it always used
    return yaml.load(header, Loader=yaml.SafeLoader)


def _libyaml_writes_alike(value: Any) -> bool:
    """No character libyaml escapes, and keys both write as `key:` (they disagree on which keys
    need `? key`: empty ones, long ones (characters or bytes), ones with a carriage return)."""
    if isinstance(value, str):
        return _LIBYAML_ESCAPES.search(value) is None
    if isinstance(value, dict):
        return all(isinstance(k, str) and k.isprintable() and 0 < len(k.encode("utf-8", "surrogatepass")) < 100
                   and _libyaml_writes_alike(k) and _libyaml_writes_alike(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_libyaml_writes_alike(v) for v in value)
    return True


def relative_path_for(memory: Memory) -> Path:
    """entries/<slug>/<role folder>/<ts>__<uuid>.md (summaries: summaries/summary.md)."""
    base = Path(ENTRIES) / conversation_slug(memory.conversation_id)
    if memory.role == "summary":
        level = memory.extra.get("summary_level")
        if memory.extra.get("summary_kind") == "session":
            return base / "summaries" / "session.md"
        if memory.extra.get("summary_kind") in ("chunk", "group") and level:  # hierarchical rebuild levels
            return base / "summaries" / f"L{int(level)}" / f"{file_stamp(memory.created_at)}__{memory.id}.md"
        return base / "summaries" / "summary.md"
    return base / ROLE_FOLDERS[memory.role] / f"{file_stamp(memory.created_at)}__{memory.id}.md"


def atomic_write(path: Path, content: str, durable: bool = True) -> None:
    """Write via a temp file in the same folder + fsync + rename: all or nothing (durable=False: the
    fsyncs left to the caller, `fsync_paths`)."""
    atomic_write_bytes(path, content.encode("utf-8"), durable=durable)


def atomic_write_bytes(path: Path, data: bytes, executable: bool = False, durable: bool = True) -> None:
    """atomic_write of bytes (a file as git has it: sync writes what it pulled). durable=False leaves
    the fsyncs to the caller (`fsync_paths`), which writing many files at once makes far cheaper."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if executable:
            os.chmod(tmp, 0o777 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if durable:
        _fsync_dir(path.parent)


def fsync_paths(paths) -> None:
    """Make files written with durable=False (and their folders) durable. Synced together, from a few
    threads, their fsyncs share the file system's journal commits instead of waiting for one each
    (1,000 files pulled by a sync: 16 s of fsyncs one by one on a busy machine)."""
    from concurrent.futures import ThreadPoolExecutor

    paths = [Path(p) for p in paths]
    if not paths:
        return
    with ThreadPoolExecutor(max_workers=min(16, len(paths))) as pool:
        list(pool.map(_fsync_file, paths))
        list(pool.map(_fsync_dir, sorted({p.parent for p in paths})))


def _fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # gone meanwhile: nothing to make durable
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_memory(root: Path, memory: Memory, path: Path | None = None, durable: bool = True) -> Path:
    """Write (or rewrite in place when path is given) and set memory.path. durable=False: the fsyncs left
    to the caller (`fsync_paths`)."""
    target = path or (root / relative_path_for(memory))
    ensure_inside(root, target)
    atomic_write(target, render(memory), durable=durable)
    memory.path = target
    return target


def ensure_inside(root: Path, target: Path) -> None:
    """Guard against any path that would leave the vault (symlinks included)."""
    root_real = os.path.realpath(root)
    target_real = os.path.realpath(target)
    if os.path.commonpath([root_real, target_real]) != root_real:
        raise UsageError(f"refusing to write {target}: it is outside the vault {root}")


def parse_memory(text: str, path: Path, mtime: float | None = None, root: Path | None = None) -> tuple[Memory, bool]:
    """Parse file content into a Memory. Returns (memory, adopted).

    A file without front matter is adopted as a note whose id is derived from its
    path (stable across processes) and whose created_at is the file's mtime. So is a file
    whose front matter has no `id` (written by hand or by another tool): its keys are kept,
    its role too when it is one memvault knows.
    """
    import yaml

    if "\x00" in text:
        raise MemoryFileError(path, "binary file (contains NUL bytes)")
    if not text.strip():
        raise MemoryFileError(path, "empty file")
    if _FIRST_LINE.match(text).group().strip() == "---":
        try:
            post = loads(text)
        except FrontMatterProblem as exc:
            raise MemoryFileError(path, str(exc)) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 2}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "syntax error"
            raise MemoryFileError(path, f"front matter is not valid YAML{where}: {problem}") from None
        meta, body = post.metadata, post.content
        if meta.get("id") in (None, ""):
            if not body:
                raise MemoryFileError(path, "front matter has no 'id' and there is no text to adopt")
            return _adopt(path, root, mtime, body, meta), True
        return _memory_from_meta(meta, body, path), False
    return _adopt(path, root, mtime, text.strip(), {}), True


def json_safe(value: Any) -> Any:
    """Front-matter values as JSON gives them: YAML dates and timestamps as ISO 8601 strings, at any
    depth; the rest as it is."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def restore_dates(meta: dict[str, Any], paths: list) -> dict[str, Any]:
    """The ISO strings at these key paths (Memory.date_paths, in an export) as the dates they were."""
    for where in paths if isinstance(paths, list) else []:
        if not isinstance(where, list) or not where:
            continue
        holder: Any = meta
        for step in where[:-1]:
            try:
                holder = holder[step]
            except (KeyError, IndexError, TypeError):
                holder = None
                break
        last = where[-1]
        try:
            text = holder[last] if holder is not None else None
        except (KeyError, IndexError, TypeError):
            continue
        if isinstance(text, str):
            try:
                holder[last] = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
            except ValueError:
                pass
    return meta


def json_value(value: Any) -> Any:
    """A front-matter value JSON cannot hold, as JSON gives it (`json.dumps(default=json_value)`): a
    YAML date or timestamp as an ISO 8601 string (2024-03-01, 2024-03-01T10:30:00+00:00)."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def adopted_id(relative: str) -> str:
    """The id a file without one gets (from its vault-relative path: the same in every process)."""
    return str(uuid.uuid5(ADOPT_NAMESPACE, relative))


def _adopt(path: Path, root: Path | None, mtime: float | None, body: str, meta: dict[str, Any]) -> Memory:
    """A file memvault did not write, as a memory: an id from its path (the same in every process),
    a note unless its front matter names a known role, created when it was last written unless
    its front matter says when; any other keys it has are kept."""
    rel = path.relative_to(root).as_posix() if root is not None else path.as_posix()
    role = str(meta.get("role") or "").strip()
    try:
        created = parse_time(meta["created_at"], "created_at") if meta.get("created_at") else None
    except ValueError:
        created = None
    if created is None:
        created = datetime.fromtimestamp(mtime, timezone.utc) if mtime is not None else utcnow()
    return Memory(
        id=adopted_id(rel),
        role=role if role in ROLE_FOLDERS and role != "summary" else "note",
        conversation_id=str(meta.get("conversation_id") or _conversation_from_path(path, root)),
        created_at=created,
        text=body,
        extra={k: v for k, v in meta.items() if k not in CORE_KEYS},
        path=path,
    )


def _conversation_from_path(path: Path, root: Path | None) -> str:
    if root is not None:
        parts = path.relative_to(root).parts
        if len(parts) >= 3 and parts[0] == ENTRIES:
            return parts[1]
    return DEFAULT_CONVERSATION


def _memory_from_meta(meta: dict[str, Any], body: str, path: Path) -> Memory:
    missing = [key for key in ("id", "role") if not meta.get(key)]
    if missing:
        raise MemoryFileError(path, f"front matter has no '{missing[0]}'")
    memory_id = str(meta["id"]).strip()
    role = str(meta["role"]).strip()
    if role not in ROLE_FOLDERS:
        raise MemoryFileError(path, f"unknown role {role!r} (one of {', '.join(ROLE_FOLDERS)})")
    if "created_at" not in meta or meta["created_at"] in (None, ""):
        raise MemoryFileError(path, "front matter has no 'created_at'")
    try:
        created = parse_time(meta["created_at"], "created_at")
    except ValueError as exc:
        raise MemoryFileError(path, str(exc)) from None
    conversation = str(meta.get("conversation_id") or DEFAULT_CONVERSATION)
    extra = {k: v for k, v in meta.items() if k not in CORE_KEYS}
    return Memory(memory_id, role, conversation, created, body, extra, path)


def read_memory(path: Path, root: Path | None = None) -> tuple[Memory, bool]:
    """Read one memory file; raises MemoryFileError naming the file and why."""
    memory, adopted, _raw, _stat = read_memory_raw(path, root)
    return memory, adopted


# Memories read before, by file (read_memory_seen): a long-lived process reads a chat's session on
# every message, and parsing the front matter costs ~0.1 ms a file where a stat costs ~5 us.
_SEEN: "OrderedDict[str, tuple[tuple, Memory, bool]]" = OrderedDict()
_SEEN_LOCK = threading.Lock()
SEEN_FILES = 4096


def read_memory_seen(path: Path, root: Path | None = None) -> tuple[Memory, bool]:
    """read_memory, from what this process read before when the file is the same (its inode, size,
    and change and modification times: any write changes one), as a copy the caller may change."""
    try:
        stat = path.lstat()
    except OSError:
        return read_memory(path, root)  # says why
    key = (stat.st_ino, stat.st_size, stat.st_ctime_ns, stat.st_mtime_ns, str(root))
    name = os.fspath(path)
    with _SEEN_LOCK:
        seen = _SEEN.get(name)
        if seen is not None and seen[0] == key:
            _SEEN.move_to_end(name)
            return _copy(seen[1]), seen[2]
    memory, adopted, _raw, read_stat = read_memory_raw(path, root)
    if (read_stat.st_ino, read_stat.st_size, read_stat.st_ctime_ns, read_stat.st_mtime_ns) == key[:4]:
        with _SEEN_LOCK:
            _SEEN[name] = (key, _copy(memory), adopted)
            _SEEN.move_to_end(name)
            while len(_SEEN) > SEEN_FILES:
                _SEEN.popitem(last=False)
    return memory, adopted


def _copy(memory: Memory) -> Memory:
    # Front matter is YAML: its values are scalars, lists and mappings; one level of copy of each is
    # what a caller that edits a memory changes (tags, a key), at a fifth of copy.deepcopy's cost.
    extra = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
             for k, v in memory.extra.items()}
    return dataclasses.replace(memory, extra=extra)


def read_memory_raw(path: Path, root: Path | None = None) -> tuple[Memory, bool, bytes, os.stat_result]:
    """read_memory, plus the bytes it parsed and the stat taken before reading them: the index
    hashes those bytes instead of reading the file a second time."""
    if path.is_symlink():
        raise MemoryFileError(path, "is a symbolic link (not followed)")
    try:
        stat = path.stat()
        if stat.st_size > MAX_MEMORY_BYTES + 64 * 1024:
            raise MemoryFileError(
                path, f"file is {stat.st_size / 1048576:.1f} MiB; the limit is {MAX_MEMORY_BYTES // 1048576} MiB"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise MemoryFileError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if b"\x00" in raw[:8192] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # not UTF-16 text either
            raise MemoryFileError(path, "binary file (not text)") from None
        raise MemoryFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    memory, adopted = parse_memory(text.lstrip("\ufeff"), path, stat.st_mtime, root)
    return memory, adopted, raw, stat


def still_live(root: Path, path: Path | None, memory_id: str, text: str | None = None) -> Memory | None:
    """The memory at `path` read again, if it is still the live memory `memory_id` (with `text`, if
    given): what a write checks before acting on a decision taken while the lock was not held."""
    if path is None:
        return None
    try:
        memory, _ = read_memory(path, root)
    except MemoryFileError:  # changed into something unreadable, or gone
        return None
    if memory.id != memory_id or memory.is_deleted or (text is not None and memory.text != text):
        return None
    return memory


def read_optional(path: Path, root: Path) -> Memory | None:
    """A memory file the product keeps for itself (summaries, session state): None when it is
    missing or unreadable, since it is rebuilt rather than reported."""
    if not path.is_file():
        return None
    try:
        return read_memory(path, root)[0]
    except MemoryFileError:
        return None


def is_memory_file(path: Path) -> bool:
    """Markdown files only; temp files and editor droppings are never memories."""
    return is_memory_name(path.name)


def is_memory_name(name: str) -> bool:
    """is_memory_file, of a file name."""
    return name.endswith(".md") and not name.startswith((".", "#", "~")) and not name.endswith("~")


def held_at(memory: Memory, moment: datetime) -> bool:
    """Whether the vault held this memory at `moment` (issue 29, `--as-of`), from its front matter:
    created by then, and live now or deleted (replaced) after it. A tombstone without a readable
    `deleted_at` cannot say when it went, so it counts as gone (never shown as held when it may not
    have been). What an import brought in after the moment and an edit's text of then are
    reading/as_of.py's to find (git knows them, the file does not)."""
    if memory.created_at > moment:
        return False
    if not memory.is_deleted:
        return True
    try:
        return parse_time(memory.extra.get("deleted_at"), "deleted_at") > moment
    except ValueError:
        return False


# What a tombstone has that the memory had not while it was live.
DELETION_KEYS = ("deleted_at", "deleted_reason", "replaced_by", DELETED_NOTE)


def as_held(memory: Memory, moment: datetime) -> Memory:
    """A memory as the vault held it at `moment` (held_at says whether it did): a tombstone without
    its deletion keys, live then (`deleted_since` says when it went; its path stays the tombstone's,
    so the file can be found); a live memory as it is."""
    if not memory.is_deleted:
        return memory
    extra = {k: v for k, v in memory.extra.items() if k not in DELETION_KEYS}
    return Memory(memory.id, memory.role, memory.conversation_id, memory.created_at, memory.text, extra, memory.path,
                  as_of=moment, deleted_since=str(memory.extra.get("deleted_at")))


def walk_entries(root: Path, include_deleted: bool = False, placed_only: bool = True) -> Iterator[Path]:
    """Every candidate memory file under entries/, sorted, without following symlinks; placed_only:
    in a kind folder only (in_kind_folder: what reindex has not moved into place is no memory yet).

    A symlinked folder is never entered; it is yielded itself, so that reading it reports it.
    """
    base = root / ENTRIES
    if not base.is_dir():
        return
    found: list[Path] = []
    for folder, dirs, files in os.walk(base, followlinks=False):
        here = Path(folder)
        rel = here.relative_to(base).parts
        if not include_deleted and len(rel) >= 2 and rel[1] == DELETED:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(here / d for d in dirs if os.path.islink(here / d))
        if not placed_only or in_kind_folder(("entries",) + rel + ("x.md",)):
            for name in files:
                candidate = here / name
                if is_memory_file(candidate):
                    found.append(candidate)
    yield from sorted(found)


def in_kind_folder(rel) -> bool:
    """Whether a vault-relative path is where memvault keeps memories: entries/<conversation>/<kind
    folder>/... (facts/, notes/, decisions/, turns/user/, turns/assistant/, summaries/, episodes/,
    pending/), or the same under deleted/. A markdown file elsewhere under entries/ (entries/loose.md,
    entries/global/hand.md) is none of them until `reindex` moves it into place (docs/design.md, "The
    vault on disk")."""
    parts = rel if isinstance(rel, tuple) else PurePosixPath(rel).parts if isinstance(rel, str) else rel.parts
    if len(parts) < 4 or parts[0] != ENTRIES:
        return False
    folders = parts[2:-1]
    if folders and folders[0] == DELETED:
        folders = folders[1:]
    if not folders or folders[0] not in KIND_FOLDERS:
        return False
    return folders[0] != "turns" or (len(folders) >= 2 and folders[1] in ("user", "assistant"))


def is_deleted_path(rel) -> bool:
    """Whether a vault-relative path (entries/<c>/deleted/...) is a tombstone's."""
    parts = rel.parts
    return len(parts) >= 3 and parts[0] == ENTRIES and parts[2] == DELETED


def deleted_path_for(root: Path, path: Path) -> Path:
    """entries/<c>/<sub...> -> entries/<c>/deleted/<sub...>"""
    rel = path.relative_to(root).parts
    if len(rel) < 3 or rel[0] != ENTRIES:
        raise UsageError(f"{path} is not inside {root / ENTRIES}")
    return root.joinpath(ENTRIES, rel[1], DELETED, *rel[2:])


def walk_entries_under(conversation_dir: Path, include_deleted: bool = False) -> Iterator[Path]:
    """Like walk_entries, for one conversation's folder (never a symlinked one)."""
    if os.path.islink(conversation_dir):
        return
    found: list[Path] = []
    for folder, dirs, names in os.walk(conversation_dir, followlinks=False):
        here = Path(folder)
        if here == conversation_dir and not include_deleted:
            dirs[:] = [d for d in dirs if d != DELETED]
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if in_kind_folder((ENTRIES, conversation_dir.name) + here.relative_to(conversation_dir).parts + ("x.md",)):
            found.extend(here / n for n in names if is_memory_file(here / n))
    yield from sorted(found)
