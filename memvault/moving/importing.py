"""`memvault import`: a chat history or a folder of notes into the vault (docs/design.md, "Import
and export").

Every imported memory gets an id derived from where it came from (uuid5 of the source, the
original conversation id and the original message id), and files are named by id. So running the
same import again finds what is there from file names alone (one walk, no file read), skips it,
and adds only what is new; a file a killed import wrote but never committed is committed by the
next run. One commit per run, naming the conversations it added to (Change.by_conversation).

Memories are made while they are written (ingest.store takes an iterator), so the export is read
once, a conversation at a time. `--extract` then learns facts from the user turns, one turn at a
time through learn.plan and learn.apply, and marks each turn `extracted: true` in the commit that
stores what it taught: an interrupted run goes on where it stopped.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator

from memvault.store import files
from memvault.errors import MemvaultError, UsageError
from memvault.store.files import Memory
from memvault.moving.import_formats import Conversation, Line, Note, Problem

SOURCES = ("chatgpt", "claude", "markdown", "jsonl")
# The namespace of imported ids: uuid5(IMPORT_NAMESPACE, "<source>\n<conversation>\n<message>").
IMPORT_NAMESPACE = uuid.UUID("5d7f1f6e-3a0b-4c52-9d7e-2b8f0e6a4c11")
# Front matter of what an import wrote (files.ORIGIN_KEY is "import").
IMPORTED_FROM = "imported_from"
ORIGINAL_CONVERSATION = "original_conversation_id"
ORIGINAL_MESSAGE = "original_message_id"
EXTRACTED = files.EXTRACTED  # on a user turn: it has been learned from
# On a note: the hash of what the import wrote (text and the note's own keys), so that the next
# import of the folder tells a note changed at its source from one changed in the vault.
IMPORTED_SHA = "imported_sha256"
# Keys of an imported note that are memvault's, not the note's (left out of that hash).
_OWN_NOTE_KEYS = {files.ORIGIN_KEY, IMPORTED_FROM, "source", IMPORTED_SHA, "updated_at", "restored_at", EXTRACTED}
# Keys of a note's own front matter that mean something else to memvault: kept as original_<key>.
_RESERVED = set(files.CORE_KEYS) | {files.ORIGIN_KEY, "source", "tags", "deleted_at", "deleted_reason", "replaces",
                                    "replaced_by", "learned_from", "unanswered", "partial", "summary_kind",
                                    "summary_level", "restored_at", IMPORTED_FROM, EXTRACTED, "links"}
_ID_IN_NAME = re.compile(r"__([0-9a-fA-F-]{36})\.md$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class ImportOptions:
    source: str
    path: Path
    conversation_prefix: str = ""
    extract: bool = False
    since: datetime | None = None
    dry_run: bool = False

    def check(self) -> "ImportOptions":
        """A usage error naming the argument, before anything is read."""
        if self.source not in SOURCES:
            raise UsageError(f"unknown source {self.source!r} (one of {', '.join(SOURCES)})")
        check_prefix(self.conversation_prefix)
        if self.source == "markdown":
            if not self.path.is_dir():
                raise UsageError(f"{self.path} is not a folder (import markdown reads a folder of .md files)")
        elif self.path.is_dir():
            raise UsageError(f"{self.path} is a folder; import {self.source} reads a file"
                             + (" (conversations.json of the export)" if self.source != "jsonl" else ""))
        elif not self.path.is_file():
            raise UsageError(f"{self.path}: no such file")
        return self


@dataclass
class ImportedConversation:
    """What one conversation (or a folder of notes, or a conversation of an export) brought."""

    conversation_id: str
    title: str
    original_id: str | None
    added: int = 0
    already: int = 0  # there from an earlier run
    updated: int = 0  # notes changed at their source since an earlier run

    def to_json(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "title": self.title, "original_id": self.original_id,
                "added": self.added, "already": self.already, "updated": self.updated}


@dataclass
class Extraction:
    """How far --extract got: user turns learned from, still to go, and why it stopped."""

    turns: int = 0  # user turns to learn from
    done: int = 0  # learned from in this run
    before: int = 0  # learned from by an earlier run
    error: str | None = None
    learned: Any = None  # learn.Learned: every change
    no_answer: int = 0  # turns the model gave no valid answer for (left unmarked, for the next run)

    def to_json(self) -> dict[str, Any]:
        return {"turns": self.turns, "done": self.done, "before": self.before, "error": self.error,
                "no_valid_answer": self.no_answer, "changes": self.learned.to_json() if self.learned else []}


@dataclass
class ImportResult:
    source: str
    path: str
    dry_run: bool
    conversations: list[ImportedConversation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    older: int = 0  # left out by --since
    commit: str | None = None
    extraction: Extraction | None = None
    kept: list[tuple[str, str]] = field(default_factory=list)  # (vault path, source): changed on both sides

    @property
    def added(self) -> int:
        return sum(c.added for c in self.conversations)

    @property
    def updated(self) -> int:
        return sum(c.updated for c in self.conversations)

    @property
    def already(self) -> int:
        return sum(c.already for c in self.conversations)

    @property
    def complete(self) -> bool:
        """Nothing was left out and, with --extract, every user turn was learned from."""
        return not self.problems and (self.extraction is None or self.extraction.error is None)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "path": self.path, "dry_run": self.dry_run, "commit": self.commit,
                "added": self.added, "already": self.already, "updated": self.updated, "older_than_since": self.older,
                "kept": [{"path": path, "source": source} for path, source in self.kept],
                "conversations": [c.to_json() for c in self.conversations],
                "skipped": [p.to_json() for p in self.problems],
                "extract": self.extraction.to_json() if self.extraction else None}


def import_id(source: str, conversation: str, message: str) -> str:
    return str(uuid.uuid5(IMPORT_NAMESPACE, f"{source}\n{conversation}\n{message}"))


def conversation_slug(prefix: str, title: str, source: str, original_id: str) -> str:
    """<prefix><title as lower-case ASCII words joined by '-'>-<8 hex of the original id>: a plain
    conversation id, so its folder has the same name."""
    short = hashlib.sha256(f"{source}\n{original_id}".encode("utf-8", "surrogatepass")).hexdigest()[:8]
    folded = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii").lower()
    words = re.sub(r"[^a-z0-9]+", "-", folded).strip("-") or "conversation"
    room = 64 - len(prefix) - len(short) - 1
    words = words[:room].rstrip("-") or "c"
    return f"{prefix}{words}-{short}"


def check_prefix(prefix: str) -> str:
    if prefix and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}", prefix):
        raise UsageError(f"conversation_prefix {prefix!r}: use at most 40 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit", params="conversation_prefix")
    return prefix


class KnownFiles:
    """The ids already in the vault (live or deleted), from file names alone, and which of those
    files git has: a file an import wrote but a kill kept from its commit is written again."""

    def __init__(self, vault):
        self.root = vault.root
        self.by_id: dict[str, str] = {}  # id -> vault-relative path
        base = vault.entries
        if base.is_dir():
            cut = len(str(self.root)) + 1
            for here, dirs, names in os.walk(base, followlinks=False):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in names:
                    found = _ID_IN_NAME.search(name)
                    if found:
                        self.by_id[found.group(1).lower()] = os.path.join(here, name)[cut:].replace(os.sep, "/")
        self.tracked: set[str] | None = None  # None: git is not used, every file counts as committed
        if self.by_id and vault.settings.enable_git_versioning:
            from memvault.store import gitrepo

            if gitrepo.is_repo(self.root) and gitrepo.head_sha(self.root) is not None:
                listed = gitrepo.git_output(self.root, "-c", "core.quotePath=false", "ls-files", "-z", "--",
                                            files.ENTRIES)
                self.tracked = set(listed.split("\0"))
            else:
                self.tracked = set()

    def get(self, memory_id: str) -> str | None:
        return self.by_id.get(memory_id.lower())

    def uncommitted(self, relative: str) -> bool:
        """A live file git does not have yet (deleted ones are never written again)."""
        return self.tracked is not None and relative not in self.tracked \
            and not files.is_deleted_path(PurePosixPath(relative))


class Importer:
    """One run: reads the source, makes the memories to write (`memories()`, an iterator that
    fills `result` as it goes), and remembers the user turns for --extract."""

    def __init__(self, vault, options: ImportOptions, progress: Progress | None = None):
        self.vault, self.options = vault, options
        self.source = options.source
        self.result = ImportResult(options.source, str(options.path), options.dry_run)
        self.known = KnownFiles(vault)
        self.user_turns: list[tuple[str, bool]] = []  # (relative path, written by this run)
        self._seen_ids: set[str] = set()
        self._seen_conversations: set[str] = set()
        self._rows: dict[str, ImportedConversation] = {}  # notes and JSON lines: by conversation
        self._progress = progress
        self.updates: list[Memory] = []  # notes changed at their source: rewritten in the import's commit

    def write(self) -> ImportResult:
        """Read the source and write what is new in one commit (with dry_run, only count it)."""
        from itertools import chain

        from memvault.store import ingest

        memories = self.memories()
        result = self.result
        if self.options.dry_run:
            for _ in memories:
                pass
        else:
            first = next(memories, None)  # nothing to write (a file of another format): no vault is made
            if first is not None or self.updates:
                change = ingest.store(self.vault, chain([first] if first is not None else [], memories), "import",
                                      by_conversation=True, progress=self._indexing, then=self._update_notes)
                result.commit = change.commit_sha
        result.conversations = [row for row in result.conversations if row.added or row.already or row.updated]
        return result

    def _update_notes(self, change) -> None:
        """The notes changed at their source, rewritten in the import's change (skipped when changed
        meanwhile)."""
        for memory in self.updates:
            if files.still_live(self.vault.root, memory.path, memory.id) is not None:
                change.rewrite(memory)

    def _indexing(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress("indexing", done, total)

    def _reading(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress("reading", done, total)

    def memories(self) -> Iterator[Memory]:
        from memvault.moving import import_formats

        path = self.options.path
        if self.source == "chatgpt":
            records = import_formats.chatgpt_conversations(path, self._reading)
        elif self.source == "claude":
            records = import_formats.claude_conversations(path, self._reading)
        elif self.source == "markdown":
            records = import_formats.markdown_notes(path, self._reading)
        else:
            records = import_formats.jsonl_lines(path, self._reading)
        for record in records:
            if isinstance(record, Problem):
                self.result.problems.append(record)
            elif isinstance(record, Conversation):
                yield from self._conversation(record)
            elif isinstance(record, Note):
                yield from self._note(record)
            else:
                yield from self._line(record)

    # -- chat exports ------------------------------------------------------------------------
    def _conversation(self, conversation: Conversation) -> Iterator[Memory]:
        result = self.result
        result.problems.extend(conversation.problems)
        if conversation.original_id in self._seen_conversations:
            result.problems.append(Problem(conversation.where, "appears twice in the file; the second one left out"))
            return
        self._seen_conversations.add(conversation.original_id)
        ids = [import_id(self.source, conversation.original_id, m.original_id or f"#{n}")
               for n, m in enumerate(conversation.messages)]
        slug = self._existing_conversation(ids) or conversation_slug(
            self.options.conversation_prefix, conversation.title, self.source, conversation.original_id)
        row = ImportedConversation(slug, conversation.title, conversation.original_id)
        for memory_id, message in zip(ids, conversation.messages):
            if memory_id in self._seen_ids:
                result.problems.append(Problem(conversation.where, f"message {message.original_id} appears twice; "
                                                                   "the second one left out"))
                continue
            self._seen_ids.add(memory_id)
            if self.options.since and message.created_at < self.options.since:
                result.older += 1
                continue
            extra = {files.ORIGIN_KEY: "import", IMPORTED_FROM: self.source, "conversation_title": conversation.title,
                     ORIGINAL_CONVERSATION: conversation.original_id}
            if message.original_id:
                extra[ORIGINAL_MESSAGE] = message.original_id
            memory = self._make(memory_id, message.text, message.role, slug, message.created_at, extra, row,
                                conversation.where, f"message {message.original_id}")
            if memory is not None:
                yield memory
        if row.added or row.already:
            result.conversations.append(row)

    def _existing_conversation(self, ids: list[str]) -> str | None:
        """The conversation an earlier run put these messages in (its title may have changed since)."""
        for memory_id in ids:
            relative = self.known.get(memory_id)
            if relative is not None:
                return PurePosixPath(relative).parts[1]  # import slugs are plain ids: the folder is the id
        return None

    def _make(self, memory_id: str, text: str, role: str, conversation: str, created: datetime,
              extra: dict[str, Any], row: ImportedConversation, where: str, what: str) -> Memory | None:
        """The memory to write, or None when it is there already (or cannot be stored)."""
        existing = self.known.get(memory_id)
        if existing is not None and not self.known.uncommitted(existing):
            row.already += 1
            if role == "user":
                self.user_turns.append((existing, False))
            return None
        if existing is not None:  # written by a run that was killed before its commit: commit it as it is
            try:
                memory = files.read_memory(self.vault.root / existing, self.vault.root)[0]
            except MemvaultError as exc:
                self.result.problems.append(Problem(where, f"{what}: {exc}"))
                return None
        else:
            try:
                memory = files.new_memory(text, role, conversation, created_at=created, extra=extra)
            except MemvaultError as exc:
                self.result.problems.append(Problem(where, f"{what}: {exc}; left out"))
                return None
            memory.id = memory_id
        row.added += 1
        if role == "user":
            self.user_turns.append((existing or files.relative_path_for(memory).as_posix(), existing is None))
        return memory

    # -- notes -------------------------------------------------------------------------------
    def _note(self, note: Note) -> Iterator[Memory]:
        folder = self.options.path.name
        conversation = f"{self.options.conversation_prefix}{_plain(folder)}" if self.options.conversation_prefix \
            else files.DEFAULT_CONVERSATION
        row = self._row(conversation, f"notes from {folder}", None)
        if self.options.since and note.created_at < self.options.since:
            self.result.older += 1
            return
        extra: dict[str, Any] = {}
        for key, value in note.front_matter.items():
            extra[f"original_{key}" if key in _RESERVED else key] = value
        extra.setdefault("title", note.title)
        if note.tags:
            extra["tags"] = note.tags
        if note.links:
            extra["links"] = note.links
        extra.update({"source": note.relative_path, files.ORIGIN_KEY: "import", IMPORTED_FROM: "markdown"})
        extra = _plain_values(extra)
        from memvault.store import secret_scan

        # The hash is of the note as its file will hold it (a secret as its placeholder), which the next
        # import compares with the vault's copy.
        extra[IMPORTED_SHA] = _note_hash(*secret_scan.as_stored(self.vault, note.text, extra))
        memory_id = import_id("markdown", folder, note.relative_path)
        if self._changed_note(memory_id, note.text, extra, row, f"{folder}/{note.relative_path}"):
            return
        memory = self._make(memory_id, note.text, "note", conversation, note.created_at, extra, row,
                            f"{folder}/{note.relative_path}", "note")
        if memory is not None:
            yield memory

    def _changed_note(self, memory_id: str, text: str, extra: dict[str, Any], row: ImportedConversation,
                      where: str) -> bool:
        """A note imported before whose source changed since: queued to be updated (the vault's copy
        unchanged since that import), or kept as the vault has it and said (changed there too).
        False when it is not such a note (new, deleted in the vault, unchanged)."""
        existing = self.known.get(memory_id)
        if existing is None or self.known.uncommitted(existing) or files.is_deleted_path(PurePosixPath(existing)):
            return False
        try:
            there = files.read_memory(self.vault.root / existing, self.vault.root)[0]
        except MemvaultError:
            return False
        imported = there.extra.get(IMPORTED_SHA)
        here = _note_hash(there.text, there.extra)
        if extra[IMPORTED_SHA] == (imported or here):
            return False  # the source is as it was imported
        row.already += 1
        if (here != imported) if imported else "updated_at" in there.extra:
            self.result.kept.append((existing, where))
            return True
        row.already -= 1
        row.updated += 1
        kept = {k: v for k, v in there.extra.items() if k in ("restored_at",)}
        updated = Memory(there.id, there.role, there.conversation_id, there.created_at, text,
                         {**extra, **kept, "updated_at": files.format_time(files.utcnow())}, there.path)
        self.updates.append(updated)
        return True

    def _row(self, conversation: str, title: str, original_id: str | None) -> ImportedConversation:
        row = self._rows.get(conversation)
        if row is None:
            row = self._rows[conversation] = ImportedConversation(conversation, title, original_id)
            self.result.conversations.append(row)
        return row

    # -- memvault's own export ---------------------------------------------------------------
    def _line(self, line: Line) -> Iterator[Memory]:
        try:
            memory, relative = exported_memory(line.item)
        except (ValueError, MemvaultError) as exc:
            self.result.problems.append(Problem(line.where, str(exc)))
            return
        row = self._row(memory.conversation_id, memory.conversation_id, None)
        if memory.id.lower() in self._seen_ids:
            self.result.problems.append(Problem(line.where, f"memory {memory.id} appears twice; the second one left out"))
            return
        self._seen_ids.add(memory.id.lower())
        if self.options.since and memory.created_at < self.options.since:
            self.result.older += 1
            return
        existing = self.known.get(memory.id)
        target = self.vault.root / relative
        if existing is None and target.exists():  # a file named otherwise (summary.md, a note dropped in)
            try:
                there = files.read_memory(target, self.vault.root)[0]
            except MemvaultError:
                there = None
            if there is None or there.id != memory.id:
                self.result.problems.append(Problem(line.where, f"{relative} already holds another memory "
                                                                f"({there.id if there else 'unreadable'}); left out"))
                return
            existing = relative
        if existing is not None and not self.known.uncommitted(existing):
            row.already += 1
            return
        memory.path = target
        row.added += 1
        yield memory


def exported_memory(item: dict[str, Any]) -> tuple[Memory, str]:
    """A memory from one line of `memvault export` (Memory.to_json), and the vault-relative path it
    had. Raises ValueError (or a MemvaultError) saying what is wrong."""
    for key in ("id", "role", "conversation_id", "created_at", "text"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise ValueError(f"'{key}' must be a non-empty string")
    if item["role"] not in files.ROLE_FOLDERS:
        raise ValueError(f"unknown role {item['role']!r}")
    meta = item.get("meta") or {}
    if not isinstance(meta, dict):
        raise ValueError("'meta' must be an object")
    clash = sorted(set(meta) & set(files.CORE_KEYS))
    if clash:
        raise ValueError(f"'meta' may not set {clash[0]!r}")
    files.check_conversation_id(item["conversation_id"])
    files.check_text(item["text"])
    size = len(item["text"].encode("utf-8", "surrogatepass"))
    if size > files.MAX_MEMORY_BYTES:
        raise ValueError(f"text is {size / 1048576:.1f} MiB; the limit is {files.MAX_MEMORY_BYTES // 1048576} MiB")
    created = files.parse_time(item["created_at"], "created_at")
    memory = Memory(item["id"].strip(), item["role"], item["conversation_id"], created, item["text"].strip(),
                    files.restore_dates(dict(meta), item.get("dates") or []))
    relative = item.get("path")
    if relative is None:
        relative = files.relative_path_for(memory).as_posix()
        if item.get("deleted"):
            relative = PurePosixPath(files.ENTRIES, *PurePosixPath(relative).parts[1:2], files.DELETED,
                                     *PurePosixPath(relative).parts[2:]).as_posix()
        return memory, relative
    if not isinstance(relative, str):
        raise ValueError("'path' must be a string")
    parts = PurePosixPath(relative).parts
    if len(parts) < 3 or parts[0] != files.ENTRIES or any(p in ("..", ".") for p in parts) \
            or "\\" in relative or not files.is_memory_file(Path(relative)) or _CONTROL.search(relative):
        raise ValueError(f"path {relative!r} is not a memory file in entries/ (entries/<conversation>/.../<name>.md)")
    if bool(item.get("deleted")) != files.is_deleted_path(PurePosixPath(relative)):
        raise ValueError(f"'deleted' does not match path {relative!r}")
    return memory, relative


def _note_hash(text: str, extra: dict[str, Any]) -> str:
    """The hash of a note as an import writes it: its text and its own keys (not memvault's)."""
    import json

    own = {k: v for k, v in extra.items() if k not in _OWN_NOTE_KEYS}
    data = json.dumps([text, own], sort_keys=True, ensure_ascii=False, default=files.json_value)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def _plain(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:24] or "notes"


def _plain_values(value: Any) -> Any:
    """A note's front matter as memvault keeps it: keys as text; dates and timestamps stay the YAML
    dates the note wrote (JSON shows them as ISO 8601 strings: files.json_safe); any other value YAML
    may make (a time of day) as its ISO text."""
    if isinstance(value, dict):
        return {str(k): _plain_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_values(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value
    if hasattr(value, "isoformat") and not isinstance(value, (str, int, float, bool)):
        return value.isoformat()
    return value


def learn_from_turns(vault, importer: Importer, settings, progress: Progress | None,
                     say: Callable[[str], None], dry_run: bool = False) -> Extraction:
    """Fact extraction and reconciliation over the user turns, oldest first, one commit per turn that
    taught something (the turn marked `extracted: true` in it); turns that taught nothing are marked
    learn.MARK_BATCH at a time. Stops at the first LLM failure (the result says where); Ctrl-C stops too,
    after marking what was done."""
    from memvault.learning import learn
    from memvault.store.llm import LLMConfig

    root = vault.root
    extraction = Extraction()
    pending: list[Memory] = []
    for relative, fresh in importer.user_turns:
        if dry_run and fresh:
            extraction.turns += 1
            continue
        try:
            turn = files.read_memory(root / relative, root)[0]
        except MemvaultError:
            continue  # gone or broken since: nothing to learn from
        if turn.is_deleted:
            continue  # the user deleted it: not something to learn from
        if not fresh and turn.extra.get(EXTRACTED):
            extraction.before += 1
            continue
        pending.append(turn)
    pending.sort(key=lambda m: (m.created_at, m.id))
    extraction.turns += len(pending) + extraction.before
    if dry_run:
        return extraction
    learner = learn.Learner(vault, LLMConfig.from_settings(settings), "import", warn=say, summarize=False)
    extraction.learned = learner.learned
    done = learn.learn_from_turns(learner, pending, None if progress is None else
                                  lambda number, total: progress("learning", number, total))
    extraction.done, extraction.no_answer = done.done, done.no_answer
    if done.stopped is not None:
        extraction.error = f"{done.stopped}; facts were extracted from {extraction.done} of {len(pending)} turns, " \
                           "run the same import again to go on"
    elif extraction.no_answer:
        extraction.error = (f"the model gave no valid answer for {extraction.no_answer} of {len(pending)} turns "
                            "(left unmarked); run the same import again to retry them")
    return extraction


def episodes_from_turns(vault, importer: Importer, extraction: Extraction, mode: str,
                        close: Callable[[str, datetime], list], say: Callable[[str], None]) -> None:
    """--extract, after the turns are in (docs/design.md, "Episodes"): each imported conversation's
    turns not in an episode yet are cut into episodes, the last one closed with boundary `import`.
    In extraction_mode predict-calibrate this is the learning (`learn_from_turns` has only counted):
    the user turns of each episode written are marked `extracted`. An LLM failure stops it, with the
    error in `extraction` (the same command goes on where it stopped)."""
    from memvault.learning import learn
    from memvault.errors import LLMError

    root = vault.root
    latest: dict[str, datetime] = {}
    for relative, _fresh in importer.user_turns:
        try:
            turn = files.read_memory(root / relative, root)[0]
        except MemvaultError:
            continue
        if not turn.is_deleted:
            latest[turn.conversation_id] = max(latest.get(turn.conversation_id, turn.created_at), turn.created_at)
    if mode == "predict-calibrate" and extraction.learned is None:
        extraction.learned = learn.Learned()
    for conversation, when in sorted(latest.items()):
        try:
            closed = close(conversation, when)
        except LLMError as exc:
            extraction.error = f"{exc}; run the same import again to go on"
            return
        if mode != "predict-calibrate":
            continue
        with vault.change("import") as change:
            change.title = f"turns of {conversation} learned from, by episode"
            for episode in closed:
                users = [t for t in episode.segment.turns if t.role == "user"]
                learn.mark_extracted(change, users)
                extraction.done += len(users)
                extraction.learned.merge(episode.learned)


def import_and_learn(vault, options: ImportOptions, progress: Progress | None, say: Callable[[str], None],
                     refresh: Callable[[], object], close: Callable[[str, datetime], list]) -> ImportResult:
    """`Memvault.import_from`: write what the source holds (one commit), then with extract learn from the
    user turns (`learn_from_turns`: per message, or only counted in extraction_mode predict-calibrate,
    which learns per episode) and cut each conversation's turns into episodes (`episodes_from_turns`;
    `close(conversation, when)` closes them). refresh: the index in step (the facts already known are
    what new ones are checked against)."""
    importer = Importer(vault, options.check(), progress)
    result = importer.write()
    if options.extract:
        if not options.dry_run and importer.user_turns:
            refresh()
        mode = vault.settings.extraction_mode
        result.extraction = learn_from_turns(vault, importer, vault.settings, progress, say,
                                             dry_run=options.dry_run or mode == "predict-calibrate")
        if not options.dry_run and importer.user_turns and result.extraction.error is None:
            episodes_from_turns(vault, importer, result.extraction, mode, close, say)
    return result
