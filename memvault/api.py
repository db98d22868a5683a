"""The front door: memvault as a Python library (docs/design.md, "The library API").

    import memvault

    vault = memvault.open_vault("~/notes/memory")        # or None: $MEMVAULT_DIR, else the default
    vault.add("My wife is Anne")
    outcome = vault.search("what is my wife's name", top_k=3)
    print(outcome.results[0].text, outcome.results[0].score)

Every face (the CLI, `memvault serve`, `memvault mcp`) is a thin layer over `Memvault`: an
operation exists once, here or in the module it names. Arguments are plain values, results
plain dataclasses with `to_json()`, which is what the faces print as JSON. Every failure is a
`MemvaultError` (an LLM that is down included), whose message is one line.

A `Memvault` is cheap to open: models and the index load on first use and then stay loaded,
so a long-lived process (a server) pays for them once. `open_vault(watch=True)` also watches
the folder, so that a warm process sees hand edits and other processes' writes at its next
read without walking every file before each one.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from memvault.errors import MemvaultError, NotFound, NothingGiven, UsageError
from memvault.store import files
from memvault.store.files import DEFAULT_CONVERSATION, Memory

# What the front door uses, by layer (docs/design.md, "Layers"). Each method imports its part inside
# itself, on purpose: a cold `memvault search` or `add` then loads only what that command needs (no
# git for a search, no litellm unless the LLM is asked; `python -X importtime`), and `import memvault`
# loads none of it.
#   moving     importing, exporting, sync (memvault sync, clone)
#   changing   manage (edit, rm, restore), undo, review
#   learning   learn (Learner: add --extract, add --jsonl --extract, learn), chat, episodes, sessions,
#              summaries, consolidate (reconcile), extraction, prompts
#   reading    retrieval (search), llm_rerank, listing (recent), history (log), browse (conversations, stats)
#   store      vault (Vault, Change), ingest (add, duplicates), reindex (reindex, check, watch), index,
#              lock, gitrepo, config, models, llm, native_memory

__all__ = ["Memvault", "SessionView", "ReconcileOutcome", "open_vault", "clone_vault", "project_folder"]

Notice = Callable[[str], None]


def open_vault(path: str | Path | None = None, *, notice: Notice | None = None, watch: bool = False,
               **overrides: Any) -> "Memvault":
    """Open the vault at `path` (None: `$MEMVAULT_DIR`, else `~/.local/share/memvault`).

    overrides: any setting (`llm_model="openai/gpt-4o-mini"`, `default_top_k=8`), over
    memvault.toml and the MEMVAULT_* environment. notice: where notices and warnings go
    (default: stderr). watch: keep the index in step with the folder through file-system
    events instead of a walk before every read (for long-lived processes; it also settles the
    process's native memory for a long life, so that it does not creep up: native_memory.py).
    The folder is created by the first write, not here.
    """
    from memvault.store.config import default_vault_path
    from memvault.store.vault import Vault

    if watch:
        from memvault.store.native_memory import settle_for_long_life

        settle_for_long_life()  # before LanceDB and ONNX Runtime start their threads
    root = Path(path).expanduser() if path is not None else default_vault_path()
    vault = Vault.open(root, {k: v for k, v in overrides.items() if v is not None}, notice=notice)
    return Memvault(vault, watch=watch)


def clone_vault(url: str, path: str | Path | None = None, *, notice: Notice | None = None,
                progress: Callable[[str, int, int], None] | None = None, **overrides: Any):
    """Clone the vault at `url` (any git URL: a bare repository on a server, GitHub, a folder) into
    `path` (None: `$MEMVAULT_DIR`, else `~/.local/share/memvault`; a new or empty folder) and build
    its index. progress(stage, done, total) while git transfers and while the index is built.
    Returns moving.sync.CloneResult, whose `vault` is the opened Memvault."""
    from memvault.moving import sync as remote
    from memvault.store.config import default_vault_path

    root = Path(path).expanduser() if path is not None else default_vault_path()
    return remote.clone(url, root, lambda where: open_vault(where, notice=notice, **overrides), progress)


def project_folder(cwd: str | Path) -> Path:
    """The project a coding agent works in from `cwd`: the git work tree holding it, else cwd itself
    (`memvault setup --scope project` writes there; docs/design.md, "Coding agents")."""
    from memvault.learning.agent_sessions import project_root

    return project_root(Path(cwd))


class Added(list):
    """The memories an add stored, plus what it did not store because a live memory of the same
    conversation and kind already says exactly that: `duplicates`, as (the memory given, the one that
    holds it). `commit`: the commit made, if any. The memories are files.Memory when they were given
    as a list; made as they were written (`add_jsonl`), they are vault.Stored records (id, role, kind,
    conversation_id, created_at, path; `read()` gives the whole memory), so that a 100,000-line add
    does not hold 100,000 texts to return them."""

    def __init__(self, stored=(), duplicates=(), commit: str | None = None):
        super().__init__(stored)
        self.duplicates: list[tuple[Memory, Memory]] = list(duplicates)
        self.commit = commit
        self.learned = None  # learn.Learned, when turns were learned from (add_jsonl with extract)
        self.episodes: list = []  # episodes.Closed written from the batch's turns

    def to_json(self, root: Path) -> list[dict[str, Any]]:
        """What `add --json` prints: each stored memory, and for each duplicate the memory that held it
        (`"stored": false`)."""
        return list(self.json_rows(root))

    def json_rows(self, root: Path) -> Iterator[dict[str, Any]]:
        """to_json one row at a time (a Stored memory is read from its file when its turn comes)."""
        for memory in self:
            yield {**memory.to_json(root), "stored": True}
        for _, held in self.duplicates:
            yield {**held.to_json(root), "stored": False}


@dataclass
class SessionView:
    """A conversation's chat session as `chat --context` shows it."""

    conversation: str
    turns: list[Memory]
    tokens: int
    max_tokens: int
    idle_seconds: int | None
    fresh_reason: str | None
    session_summary: str
    summary: str | None
    unanswered: list[Memory] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation,
            "turns": [{"id": t.id, "role": t.role, "created_at": t.created_at.isoformat(), "text": t.text}
                      for t in self.turns],
            "unanswered": [{"id": t.id, "created_at": t.created_at.isoformat(), "text": t.text}
                           for t in self.unanswered],
            "tokens": self.tokens, "max_session_tokens": self.max_tokens, "idle_seconds": self.idle_seconds,
            "fresh_session": self.fresh_reason, "session_summary": self.session_summary, "summary": self.summary,
        }


@dataclass
class ReconcileOutcome:
    """The clusters `reconcile` found, what it decided for each, and what it changed."""

    plans: list  # consolidate.ClusterPlan
    dry_run: bool
    events: list = field(default_factory=list)  # vault.Event, empty for a dry run

    @property
    def steps(self) -> list:
        return [step for plan in self.plans for step in plan.steps]

    def to_json(self) -> list[dict[str, Any]]:
        return [{"conversation_id": p.conversation, "newest": {"id": p.newest.id, "text": p.newest.text},
                 "steps": [s.to_json() for s in p.steps]} for p in self.plans]


@dataclass
class EpisodesOutcome:
    """A conversation's episodes (`memvault episodes`): the live ones, oldest first; the turns not in
    one yet, cut as they would be (`pending`: the closed segments, then the open one); and what this
    call wrote (`closed`: episodes.Closed) or replaced (`rebuilt`: episodes.Rebuilt)."""

    conversation: str
    episodes: list[Memory]
    pending: list = field(default_factory=list)  # episodes.Segment
    closed: list = field(default_factory=list)  # episodes.Closed
    rebuilt: Any = None
    dry_run: bool = False

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        from memvault.learning.episodes import episode_json

        return {"conversation_id": self.conversation, "dry_run": self.dry_run,
                "episodes": [episode_json(e, root) for e in self.episodes],
                "pending": [{"started_at": files.format_time(s.started_at), "ended_at": files.format_time(s.ended_at),
                             "turns": len(s.turns), "boundary": s.boundary} for s in self.pending],
                "closed": [c.to_json(root) for c in self.closed],
                "replaced": [{"id": old.id, "replaced_by": new.id} for old, new in
                             (self.rebuilt.replaced if self.rebuilt else [])]}


class Memvault:
    """One vault: its memories, index, models and LLM, behind one method per operation."""

    def __init__(self, vault, watch: bool = False):
        self._vault = vault
        self._watcher = None
        if watch:
            from memvault.store.reindex import FolderWatch

            self._watcher = FolderWatch(vault)
        self._read_lock = threading.Lock()  # one index sync at a time in this process
        self._llm_orderer = None  # made on first use: llm_rerank imports pydantic

    # -- the vault -------------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self._vault.root

    @property
    def settings(self):
        return self._vault.settings

    @property
    def vault(self):
        """The lower layer (files, lock, changes, git); for tests and tools."""
        return self._vault

    def exists(self) -> bool:
        """Whether the vault has been created (by a first write) yet."""
        return self._vault.exists()

    def close(self) -> None:
        """Stop watching the folder (a no-op unless opened with watch=True)."""
        if self._watcher is not None:
            self._watcher.stop()

    def __enter__(self) -> "Memvault":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def relative(self, path: Path) -> str:
        """A path inside the vault as the vault-relative posix path the CLI shows."""
        return self._vault.relative(path)

    def _say(self, message: str) -> None:
        self._vault.say(message)

    def _say_if_unknown(self, conversation: str) -> None:
        """A conversation asked for by name that the vault does not have (a typo?): said with the ones
        whose names are close, on the notice channel; asking is not an error."""
        from memvault.reading import browse

        if conversation == DEFAULT_CONVERSATION or not self._vault.entries.is_dir() \
                or (self._vault.entries / files.conversation_slug(conversation)).is_dir():
            return
        self._say(f"memvault: no conversation {conversation!r} in the vault{browse.close_ones(self._vault, conversation)}")

    # -- writing ---------------------------------------------------------------------------
    def add(self, text: str | Iterable[str], *, conversation: str = DEFAULT_CONVERSATION, kind: str = "fact",
            tags: Iterable[str] = (), source: str | None = None, rationale: str | None = None,
            alternatives: Iterable[str] = (), meta: Mapping[str, Any] | None = None,
            created_at: datetime | str | None = None, each_line: bool = False, allow_duplicate: bool = False,
            progress: Callable[[int, int], None] | None = None) -> "Added":
        """Store text verbatim as memories (one per string; with each_line, one per non-empty line,
        list markers stripped), indexed and committed at once. A text a live memory of the same
        conversation and kind already holds word for word is not stored again (so a cron job can
        add the same file every night) unless allow_duplicate. Returns the stored memories (an
        `Added`, which also lists the duplicates)."""
        from memvault.store import ingest

        pieces = [text] if isinstance(text, str) else list(text)
        if each_line:
            pieces = [line for piece in pieces for line in ingest.split_lines(piece)]
        pieces = [p for p in pieces if p and p.strip()]
        if not pieces:
            raise NothingGiven("nothing to add: the text is empty", params="text")
        memories = ingest.new_memories(pieces, conversation=conversation, kind=kind, tags=tags, source=source,
                                       rationale=rationale, alternatives=alternatives, meta=meta,
                                       created_at=_time(created_at, "created_at"))
        return self.add_memories(memories, allow_duplicate=allow_duplicate, progress=progress)

    def add_jsonl(self, text: str, origin: str = "stdin", *, allow_duplicate: bool = False, extract: bool = False,
                  progress: Callable[[int, int], None] | None = None, **defaults: Any) -> "Added":
        """Store one memory per JSON line ({"text", "conversation_id"?, "created_at"?, "kind"?, "role"?,
        "tags"?, "source"?, "rationale"?, "alternatives"?, "meta"?}); every line is checked before
        anything is written. defaults: the same keys, for lines that leave them out. Duplicates as for
        `add`. A line with "role": "user" or "assistant" is a chat turn; with extract, the turns are
        learned from (per message, or per episode in extraction_mode predict-calibrate) and cut into
        episodes, the batch's last one closed (`Added.learned`, `Added.episodes`). The memories are made,
        written and indexed a batch at a time (one commit), and returned as vault.Stored records (id,
        path, ...; `read()` gives a memory whole), so that a 100,000-line add never holds them all."""
        from memvault.store import ingest

        count, turns = ingest.check_jsonl(text, origin, defaults)
        if not count:
            raise MemvaultError(f"nothing to add: {origin} has no JSON lines")
        if extract and not turns:
            raise UsageError(f"extract with jsonl learns from chat turns: {origin} has no line with "
                             '"role": "user" or "assistant"', params=("extract", "jsonl"))
        memories = ingest.iter_jsonl(text, origin, defaults)
        turns_given: list[Memory] = []
        if extract:  # learning is owed to each user turn until it is done (docs/design.md, "The write path")
            memories = (_owed_learning(m, turns_given) for m in memories)
        added = self.add_memories(memories, allow_duplicate=allow_duplicate, progress=progress, expected=count)
        if extract:  # the turns whole (learning reads their texts and marks them), those that were stored
            stored = {m.id for m in added}
            self._learn_from_batch([m for m in turns_given if m.id in stored], added)
        return added

    def _learn_from_batch(self, turns: list[Memory], added: "Added") -> None:
        """Learning from a batch of stored turns (`add --jsonl --extract`): per user message in
        extraction_mode message (as `add --extract`), then every conversation's turns not in an episode
        yet cut into episodes, the last one closed with boundary `import` (and, in predict-calibrate,
        learned from per episode)."""
        learner = self._learner("add", summarize=False)
        if self.settings.extraction_mode == "message":
            try:
                for turn in sorted((t for t in turns if t.role == "user"), key=lambda t: (t.created_at, t.id)):
                    learner.message(turn.text, turn.conversation_id, now=turn.created_at, turn=turn, mark=True,
                                    commit_empty=False, title=f"facts from a turn of {turn.conversation_id}")
            finally:
                learner.flush()
        added.learned = learner.learned
        for conversation in dict.fromkeys(t.conversation_id for t in turns):
            latest = max(t.created_at for t in turns if t.conversation_id == conversation)
            for closed in self.close_episodes(conversation, end="import", now=latest, command="add", strict=True):
                added.episodes.append(closed)
                added.learned.merge(closed.learned)

    def add_memories(self, memories: Iterable[Memory], *, allow_duplicate: bool = True,
                     progress: Callable[[int, int], None] | None = None, expected: int | None = None) -> "Added":
        """Store memories made with `files.new_memory` (a list, or an iterator that makes them as they are
        written) in one commit; with allow_duplicate=False, not those a live memory already holds word
        for word (same conversation and kind), nor a second copy within them."""
        from memvault.store import ingest
        from memvault.store.vault import ADD

        duplicates: list[tuple[Memory, Memory]] = []
        source = memories if allow_duplicate else ingest.without_duplicates(self._vault, memories, duplicates)
        # Memories made as they are written (an iterator) are returned as Stored records: holding
        # them whole until the end is what made a 100,000-line add --jsonl peak at 814 MB.
        slim = not isinstance(memories, (list, tuple))
        change = ingest.store(self._vault, source, "add", progress=progress, expected=expected, slim=slim)
        stored = [event.memory for event in change.of(ADD)]
        return Added(stored, duplicates, change.commit_sha if stored else None)

    @staticmethod
    def check_extract(kind: str = "fact", **add_options: Any) -> None:
        """Refuse what does not go with extract (a kind other than fact; tags, source, rationale,
        alternatives, allow_duplicate): the one rule every face checks before `add_extracted`."""
        from memvault.store.ingest import check_extract

        check_extract(kind, **add_options)

    def add_extracted(self, text: str | Iterable[str], *, conversation: str = DEFAULT_CONVERSATION,
                      now: datetime | str | None = None, each_line: bool = False):
        """Let the LLM extract facts from the user's words and reconcile them with what is known:
        one commit per text (with each_line, per non-empty line). Returns a `learn.Learned` with every
        change (ADD, UPDATE, REPLACE, DELETE, EVICT). An LLM that is down raises LLMError; nothing is
        written for that text."""
        files.check_conversation_id(conversation)
        if each_line and isinstance(text, str):
            from memvault.store.ingest import split_lines

            text = split_lines(text)
        texts = [text] if isinstance(text, str) else list(text)
        texts = [t for t in texts if t and t.strip()]
        if not texts:
            raise NothingGiven("nothing to add: the text is empty", params="text")
        for piece in texts:
            files.check_text(piece, "the text")
        clock = _time(now, "now")
        learner = self._learner("add")
        if self.settings.extraction_mode == "predict-calibrate":
            # The texts given together are one episode (no episode file: no turns to point at); a
            # model that gives no valid answer leaves the per-text path below.
            said = [files.new_memory(piece, "user", conversation, created_at=clock) for piece in texts]
            plan = learner.plan_episode(said, conversation, None)
            if plan is not None:
                with self._vault.change("add") as change:
                    return learner.store(change, plan, clock)
        for piece in texts:
            learner.message(piece, conversation, now=clock)
        return learner.learned

    def _learner(self, command: str, summarize: bool | None = None):
        """The one learning path (learn.Learner) for a command of this vault: the index brought in
        step before each plan, warnings through the vault's notices."""
        from memvault.learning.learn import Learner
        from memvault.store.llm import LLMConfig

        return Learner(self._vault, LLMConfig.from_settings(self.settings), command, warn=self._say,
                       refresh=self._fresh_index, summarize=summarize)

    def edit(self, id_or_prefix: str, text: str | None = None, *, editor: list[str] | None = None,
             retry: Callable[[str], bool] | None = None):
        """Change a memory: to `text` (the front matter kept), or in an editor (`$VISUAL`/`$EDITOR`
        unless `editor` is given) on a copy that must still be a valid memory. Indexed and committed.
        Returns manage.EditResult (memory, changed)."""
        from memvault.changing import manage

        if text is not None:
            return manage.set_text(self._vault, id_or_prefix, text)
        return manage.edit(self._vault, id_or_prefix, editor=editor, retry=retry)

    def remove(self, ids: str | Iterable[str], now: datetime | None = None, *, reason: str | None = None
               ) -> list[Memory]:
        """Soft-delete memories (moved under deleted/, reason user), in one commit; one bad id
        removes nothing. reason: why, in the user's words, kept in the tombstone's front matter
        as `deleted_note` (and shown by `log`)."""
        from memvault.changing import manage

        return manage.remove(self._vault, [ids] if isinstance(ids, str) else list(ids), now=now, reason=reason)

    def undo(self, commit: str | None = None):
        """Take back one memvault change as a new commit (default: the newest): what it added is taken
        out, what it replaced, evicted or deleted is live again; re-indexed. Refuses a commit memvault did
        not make, and one whose files changed since. Returns undo.UndoResult."""
        from memvault.changing import undo

        return undo.undo(self._vault, commit)

    def restore(self, id_or_prefix: str):
        """Bring one deleted or replaced memory back live (committed, re-indexed); returns the RESTORE
        vault.Event."""
        from memvault.changing import undo

        return undo.restore(self._vault, id_or_prefix)

    def episodes(self, conversation: str = DEFAULT_CONVERSATION, *, close: bool = False, rebuild: bool = False,
                 dry_run: bool = False, now: datetime | str | None = None) -> EpisodesOutcome:
        """The conversation's episodes (docs/design.md, "Episodes"), and the turns not in one yet, cut
        where they would be. Every episode that has closed (a time gap, a clear, a topic shift) is
        written now, with learning in extraction_mode predict-calibrate; close: the open one too.
        rebuild: cut the turns the episodes cover again (old episode files soft-deleted with
        replaced_by; nothing learned again). dry_run: say what would be written, call no model,
        write nothing."""
        from memvault.learning import episodes
        from memvault.store.llm import LLMConfig

        files.check_conversation_id(conversation)
        self._vault.require_existing()
        clock = _time(now, "now") or files.utcnow()
        self._fresh_index()
        cfg = LLMConfig.from_settings(self.settings)
        outcome = EpisodesOutcome(conversation, [], dry_run=dry_run)
        if rebuild:
            outcome.rebuilt = episodes.rebuild(self._vault, cfg, conversation, dry_run=dry_run, now=clock,
                                               warn=self._say)
            if not dry_run:
                self._fresh_index()
        outcome.pending = episodes.pending_segments(self._vault, conversation, clock, "closed" if close else None)
        if not dry_run and any(s.boundary for s in outcome.pending):
            outcome.closed = episodes.close(self._vault, cfg, conversation, now=clock, refresh=self._fresh_index,
                                            warn=self._say, segments=outcome.pending)
            outcome.pending = [s for s in outcome.pending if s.boundary is None]
        outcome.episodes = episodes.live_episodes(self._vault, conversation)
        return outcome

    # -- moving in and out -------------------------------------------------------------------
    def import_from(self, source: str, path: str | Path, *, conversation_prefix: str = "", extract: bool = False,
                    since: datetime | str | None = None, dry_run: bool = False,
                    progress: Callable[[str, int, int], None] | None = None):
        """Bring in a history: source "chatgpt" or "claude" (the conversations.json of a data export),
        "markdown" (a folder of .md notes) or "jsonl" (a `memvault export`). Each conversation becomes
        a conversation of turns with their original times, each note a note; what is already there
        (by original id) is skipped, so running it again adds only what is new. One commit. With
        extract, facts are then learned from the user turns (the LLM; one commit per turn that
        taught something; resumable). since: only what was said at or after. progress(stage, done,
        total) with stages "reading", "indexing", "learning". Returns importing.ImportResult: what
        was added per conversation, what was there, what was left out and why (`problems`)."""
        from memvault.moving import importing

        options = importing.ImportOptions(source, Path(path).expanduser(), conversation_prefix, extract,
                                          _time(since, "since"), dry_run).check()
        importer = importing.Importer(self._vault, options, progress)
        result = importer.write()
        if extract:
            if not dry_run and importer.user_turns:
                self._fresh_index()  # the facts already known are what new ones are checked against
            # In extraction_mode predict-calibrate, learning waits for the episodes (this only counts).
            by_episode = self.settings.extraction_mode == "predict-calibrate"
            result.extraction = importing.learn_from_turns(self._vault, importer, self.settings, progress,
                                                           self._say, dry_run=dry_run or by_episode)
            if not dry_run and importer.user_turns and result.extraction.error is None:
                importing.episodes_from_turns(
                    self._vault, importer, result.extraction, self.settings.extraction_mode,
                    lambda conversation, when: self.close_episodes(conversation, end="import", now=when,
                                                                   command="import", strict=True), self._say)
        return result

    def export(self, output, *, conversation: str = DEFAULT_CONVERSATION, all_conversations: bool = False,
               include_deleted: bool = False, since: datetime | str | None = None, format: str = "jsonl"):
        """Write memories out: `format` "jsonl" (every front-matter key and the text, one memory per
        line: what `import_from("jsonl", ...)` reads back into the same files) or "markdown" (a digest
        per conversation: summary, facts, notes, decisions, newest first). output: a path (written
        whole or not at all) or an open text stream. Returns exporting.ExportResult."""
        from memvault.moving import exporting

        files.check_conversation_id(conversation)
        return exporting.export(self._vault, output, conversations=None if all_conversations else [conversation],
                                include_deleted=include_deleted, since=_time(since, "since"), fmt=format)

    # -- reading ---------------------------------------------------------------------------
    def get(self, id_or_prefix: str, *, as_of: datetime | str | None = None) -> Memory:
        """A memory by id or unique prefix of at least 4 characters; a deleted one too (live ones
        win over tombstones). NotFound or an ambiguous-prefix UsageError otherwise. as_of: the
        memory as the vault held it then (a tombstone of a memory deleted later comes back as it
        was, without its deletion keys); NotFound, saying why, when it was not held then."""
        from memvault.changing import manage

        memory = manage.find(self._vault, id_or_prefix)
        moment = _time(as_of, "as_of")
        if moment is None:
            return memory
        if not files.held_at(memory, moment):
            when = files.format_time(moment)
            if memory.created_at > moment:
                raise NotFound(f"memory {memory.id} did not exist yet at {when} (created {files.format_time(memory.created_at)})")
            raise NotFound(f"memory {memory.id} was deleted before {when} "
                           f"(deleted_at {memory.extra.get('deleted_at') or 'not recorded'})")
        return files.as_held(memory, moment)

    def recent(self, conversation: str | None = None, *, limit: int = 20, kinds: Iterable[str] | None = None,
               tags: Iterable[str] = (), since: datetime | str | None = None, until: datetime | str | None = None,
               deleted: bool = False, as_of: datetime | str | None = None, cursor: str | None = None):
        """The newest live memories, newest first: of one conversation (None: every conversation),
        of some kinds (fact, note, decision, turn; None: all of them), with all these tags, created
        within since..until, at most `limit`; with deleted, the deleted ones instead; with as_of,
        those the vault held at that moment (deleted later: as they were then). Found by file
        name (`<ts>__<id>.md` sorts by creation time), so only the files returned are read (and
        those a tag filter must look into); no index, no model. `memvault ls` prints it.

        A page at a time: the order is creation time, then id (both newest/highest first), and
        the result is a listing.Page, a list of the memories with `next_cursor`: None on the last
        page, else an opaque string that, given back as `cursor` with the same filters, returns
        the page after this one, exactly, also when many memories share one creation time. A
        cursor no listing gave is a UsageError naming `cursor`."""
        from memvault.reading import listing

        if conversation is not None:
            files.check_conversation_id(conversation)
            self._say_if_unknown(conversation)
        roles = files.roles_for_kinds(kinds)
        from memvault.store.state import owner_lookup

        with owner_lookup(self._vault.sidecar / "state.db") as owner_of:  # the index's record, not the index
            return listing.newest(self._vault.entries, conversation, limit=limit, roles=roles,
                                  on_error=lambda exc: self._say(f"memvault: skipped {exc}"), tags=tuple(tags or ()),
                                  since=_time(since, "since"), until=_time(until, "until"), deleted=deleted,
                                  owner_of=owner_of, as_of=_time(as_of, "as_of"), cursor=cursor)

    def search(self, query: str, *, top_k: int | None = None, conversation: str = DEFAULT_CONVERSATION,
               all_conversations: bool = False, kinds: Iterable[str] | None = None, tags: Iterable[str] = (),
               since: datetime | str | None = None, until: datetime | str | None = None,
               now: datetime | str | None = None, rerank: bool = True, recency_weight: float | None = None,
               mmr_lambda: float | None = None, threshold: float | None = None, retriever: str = "hybrid",
               relevance_floor: float | None = None, session_weight: float | None = None,
               as_of: datetime | str | None = None):
        """The whole read path: dense + BM25 candidates from the conversation and `global` (or every
        conversation), cross-encoder rerank where one is available, the session's lift, recency, MMR
        diversity; without a reranker, memories that match the query too little (relevance_floor)
        are left out. as_of: search what the vault held at that moment (memories created later
        absent, those deleted or replaced later present; `now` defaults to it).
        Options left None come from the settings. Returns a retrieval.SearchOutcome."""
        query_obj = self._query(query, top_k=top_k, conversation=conversation, all_conversations=all_conversations,
                                kinds=kinds, tags=tags, since=since, until=until, now=now, as_of=as_of, rerank=rerank,
                                recency_weight=recency_weight, mmr_lambda=mmr_lambda, threshold=threshold,
                                retriever=retriever, relevance_floor=relevance_floor,
                                session_weight=session_weight)
        if not all_conversations:
            self._say_if_unknown(conversation)
        return self._run_search(query_obj)

    def search_many(self, requests: Iterable[str | Mapping[str, Any]], *, origin: str = "queries",
                    **defaults: Any) -> Iterator[tuple[Any, Any]]:
        """Many searches over one loaded index: each request a mapping (or a JSON line) with
        "query" and optionally "qid", "conversation_id", "now", "k"; `defaults` are `search`'s
        options for all. Yields (qid, SearchOutcome) in order. A bad request is a UsageError
        naming its line."""
        for number, request in enumerate(requests, 1):
            where = f"{origin} line {number}"
            if isinstance(request, str):
                if not request.strip():
                    continue
                try:
                    request = json.loads(request)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(request, Mapping) or not isinstance(request.get("query"), str):
                raise UsageError(f"{where}: expected an object with a 'query' string")
            options = dict(defaults)
            try:
                if request.get("conversation_id"):
                    options["conversation"] = str(request["conversation_id"])
                if request.get("now"):
                    options["now"] = request["now"]
                if request.get("k"):
                    options["top_k"] = int(request["k"])
                query_obj = self._query(request["query"], **options)
            except (ValueError, TypeError, MemvaultError) as exc:
                raise UsageError(f"{where}: {exc}") from None
            yield request.get("qid"), self._run_search(query_obj)

    def prompt_block(self, outcome, conversation: str = DEFAULT_CONVERSATION) -> str:
        """The block a chat sends the model before the user's message: the conversation's rolling
        summary and the results, labelled as background context, never instructions; dated, today
        being the search's clock (`now`)."""
        from memvault.reading.retrieval import injection_block
        from memvault.learning.summaries import written_at

        summary = self.summary(conversation)
        return injection_block(outcome.results, summary.text if summary else None,
                               today=getattr(outcome, "now", None), summary_written=written_at(summary))

    def summary(self, conversation: str = DEFAULT_CONVERSATION) -> Memory | None:
        """The conversation's rolling summary, if it has one."""
        from memvault.learning.summaries import read_rolling_summary

        files.check_conversation_id(conversation)
        return read_rolling_summary(self._vault, conversation)

    def log(self, id_or_prefix: str | None = None, *, limit: int | None = None, since: str | None = None,
            until: str | None = None, max_changes: int | None = None):
        """The history of memory changes, newest first, from git (hand commits too); with an id,
        the story of that memory, through its replacements. Returns history.LogEntry items.
        max_changes: list at most this many changes of one commit (`changes_total` counts them
        all): an import is one commit of thousands of files, each read to be listed."""
        from memvault.store import gitrepo
        from memvault.reading.history import history, id_resolver

        self._vault.require_existing()
        missing = self._vault.history_missing()
        if missing:
            from memvault.errors import VaultStateError

            raise VaultStateError(missing)
        if self.settings.enable_git_versioning and not (self.root / ".git").exists():
            if id_or_prefix is not None:
                raise NotFound(f"no memory with id {id_or_prefix!r} in the history")
            return []  # nothing committed yet (a watching server made the folders, or files came by hand)
        for option, value in (("since", since), ("until", until)):
            if value is not None:
                try:
                    files.parse_time(value)  # an ISO date is compared exactly
                except ValueError:
                    gitrepo.check_date(self.root, value, option)
        if id_or_prefix is None:
            return history(self.root, limit=limit, since=since, until=until, max_changes=max_changes)
        return history(self.root, limit=limit, since=since, until=until, follow=id_or_prefix, max_changes=max_changes,
                       resolve=id_resolver(self._vault))

    def log_for_model(self, id_or_prefix: str | None = None, *, limit: int | None = None,
                      max_changes: int | None = None) -> list[dict]:
        """`log` as JSON, each secret its texts still hold in git history (from before it was withheld:
        an older vault, a hand commit) shown as its placeholder: what a model may be shown (MCP's
        memory_history)."""
        from memvault.store import secret_scan

        entries = self.log(id_or_prefix, limit=limit, max_changes=max_changes)
        return [secret_scan.redact_history(self, entry.to_json()) for entry in entries]

    def conversations(self) -> list:
        """Every conversation with its live memories counted by kind, its deleted ones, its newest
        activity and whether it has a summary, newest first (browse.ConversationInfo items)."""
        from memvault.reading import browse

        self._vault.require_existing()
        return browse.conversations(self._vault)

    def stats(self) -> dict[str, Any]:
        """The vault in numbers: memories by kind and conversation, the index's rows and state, the
        models, the last commit, disk use."""
        from memvault.reading import browse

        self._vault.require_existing()
        return browse.stats(self._vault)

    def models(self, download: bool = False) -> dict[str, dict[str, Any]]:
        """The embedding model and the reranker: name, whether they load, and why not.
        download: fetch them into fastembed's cache (the only network access memvault makes
        on its own account)."""
        from memvault.store.models import ModelError, get_embedder, get_reranker

        settings = self.settings
        status: dict[str, dict[str, Any]] = {}
        try:
            embedder = get_embedder(settings.embedding_model, allow_download=download)
            status["embedding_model"] = {"name": embedder.name, "dim": embedder.dim,
                                         "fingerprint": embedder.fingerprint, "available": True}
        except ModelError as exc:
            status["embedding_model"] = {"name": settings.embedding_model, "available": False, "error": str(exc)}
        problems: list[str] = []
        reranker = get_reranker(settings.reranker_model, warn=problems.append, allow_download=download)
        status["reranker_model"] = {"name": settings.reranker_model, "available": reranker is not None,
                                    **({"error": problems[0]} if problems else {})}
        return status

    # -- chat --------------------------------------------------------------------------------
    def chat(self, message: str, *, conversation: str = DEFAULT_CONVERSATION, stream: bool = True,
             learn: bool = True, use_memory: bool = True, now: datetime | str | None = None,
             model: str | None = None, top_k: int | None = None, history: list[dict] | None = None,
             user_message: Mapping[str, Any] | None = None, llm_options: Mapping[str, Any] | None = None,
             upstream_objects: bool = False, after_user: list[dict] | None = None, resent: bool = False):
        """Start an exchange with the LLM, memories injected. Returns a chat.ChatTurn: iterate it
        for the reply's text pieces (both turns are stored and committed when it ends), then call
        `.finish()` for the memory upkeep and the chat.ChatResult. `ask` does all of it at once.

        history: the messages before this one as a client keeps them (OpenAI shape), sent as they
        are instead of memvault's own session. user_message: with history, the client's own message
        object for this message (its content may carry images besides `message`, its text), sent as
        it is. llm_options: sampling options for the model (max_tokens, top_p, stop, temperature...).
        upstream_objects (a proxy): iterating the turn gives the upstream's answer, or its chunks, in
        OpenAI's shape (tool calls, usage...), llm_options being every field the client sent; only the
        text is stored. after_user: with history, a tool round after the message (the assistant's
        tool calls, the results), sent after it; the message's turn stored already is not stored again.
        resent: with history, the client marks this request its retry of the message: the newest user
        turn with the same text is its turn even when answered since (the client never got that reply)."""
        from memvault.learning import chat
        from memvault.store.config import coerce
        from memvault.store.llm import LLMConfig

        files.check_conversation_id(conversation)
        message = (message or "").strip()
        if not message:
            raise NothingGiven("nothing to send: the message is empty", params="message")
        files.new_memory(message, "user", conversation)  # refuse what could not be stored before any model runs
        cfg = LLMConfig.from_settings(self.settings)
        if model is not None:
            cfg = LLMConfig(**{**cfg.__dict__, "model": coerce("llm_model", model, "option model", param="model")})
        options = chat.ChatOptions(conversation=conversation, learn=learn, use_memory=use_memory, stream=stream,
                                   now=_time(now, "now"), top_k=top_k, model=model,
                                   history=list(history) if history is not None else None,
                                   user_message=dict(user_message) if user_message is not None else None,
                                   llm_options=dict(llm_options or {}), upstream_objects=upstream_objects,
                                   after_user=list(after_user) if after_user else None, resent=resent)

        def memories(text: str, top: int, clock: datetime, skip_turns_since: datetime | None, skip_ids: tuple):
            if not self.exists():
                return []  # the first chat of a new vault
            self._say_if_unknown(conversation)
            return self._run_search(self._query(text, top_k=top, conversation=conversation, now=clock,
                                                skip_turns_since=skip_turns_since, skip_ids=skip_ids)).results

        return chat.start(self._vault, cfg, message, options, memories, warn=self._say, refresh=self._fresh_index)

    def llm_models(self) -> list[dict[str, Any]]:
        """The models the configured LLM endpoint serves (its `/models` list, OpenAI shape: each with
        an `id`). LLMError naming the endpoint when it cannot be asked."""
        from memvault.store import llm

        return llm.list_models(llm.LLMConfig.from_settings(self.settings))

    def ask(self, message: str, **options: Any):
        """`chat` in one call, without streaming: the reply, stored, and the upkeep done."""
        return self.chat(message, stream=False, **options).finish()

    def session(self, conversation: str = DEFAULT_CONVERSATION, now: datetime | str | None = None) -> SessionView:
        """The conversation's current chat session (what the next `chat` will send)."""
        from memvault.learning import sessions

        files.check_conversation_id(conversation)
        clock = _time(now, "now") or files.utcnow()
        settings = self.settings
        session = sessions.load(self._vault, conversation, clock, settings.hard_decay_minutes)
        idle = session.idle(clock)
        summary = self.summary(conversation)
        return SessionView(conversation, session.turns, session.tokens(), settings.max_session_tokens,
                           None if idle is None else max(0, round(idle.total_seconds())), session.fresh_reason,
                           session.summary, summary.text if summary else None, session.unanswered)

    def clear_session(self, conversation: str = DEFAULT_CONVERSATION, now: datetime | str | None = None) -> None:
        """Start a fresh chat session: later chats do not see the earlier turns (memories still apply)."""
        from memvault.learning import chat

        files.check_conversation_id(conversation)
        clock = _time(now, "now") or files.utcnow()
        chat.clear_session(self._vault, conversation, clock)
        self.close_episodes(conversation, end="session-clear", now=clock, command="chat")

    def close_episodes(self, conversation: str, *, end: str | None, now: datetime, command: str,
                       strict: bool = False) -> list:
        """Write the conversation's episodes that have closed (the last one too, when `end` says why),
        learning from them in extraction_mode predict-calibrate. A model that fails is a warning (strict:
        an LLMError): the turns stay, and the next close (a chat, `memvault episodes`) takes them up."""
        from memvault.learning import episodes
        from memvault.errors import LLMError
        from memvault.store.llm import LLMConfig

        if not self.exists():
            return []
        self._fresh_index()
        try:
            return episodes.close(self._vault, LLMConfig.from_settings(self.settings), conversation, now=now,
                                  end=end, refresh=self._fresh_index, warn=self._say, command=command)
        except LLMError as exc:
            if strict:
                raise
            self._say(f"memvault: warning: episode not closed, the turns wait for the next close: {exc}")
            return []

    # -- coding agents (docs/design.md, "Coding agents"; learning/agent_sessions.py) ----------
    def project_conversation(self, cwd: str | Path) -> str:
        """The conversation of a coding agent working in `cwd`: the `project_conversations` setting's entry
        for the deepest folder holding it, else its project (git root, else the folder), `~/...` under
        the home folder."""
        from memvault.learning import agent_sessions

        return agent_sessions.project_conversation(self.settings, cwd)

    def agent_context(self, conversation: str, *, max_tokens: int | None = None,
                      now: datetime | str | None = None):
        """What a coding agent is told when its session starts: the conversation's rolling summary, open
        decisions, recent episodes and notes, then every project's decisions and notes, newest first, within
        max_tokens (None: the hook_context_tokens setting). No model, no index. Returns
        agent_sessions.AgentContext (its `text` "" when the vault holds nothing for it)."""
        from memvault.learning import agent_sessions

        files.check_conversation_id(conversation)
        budget = self.settings.hook_context_tokens if max_tokens is None else max_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise UsageError(f"max_tokens must be a whole number of at least 0, not {budget!r}", params="max_tokens")
        return agent_sessions.context(self._vault, conversation, budget, _time(now, "now") or files.utcnow())

    def prompt_context(self, prompt: str, *, conversation: str = DEFAULT_CONVERSATION, agent: str | None = None,
                       session: str | None = None, top_k: int | None = None, now: datetime | str | None = None):
        """The memories that fit a coding agent's prompt, as the chat's dated block: the conversation's and
        `global`'s, the turns the agent's `session` stored left out (the agent has them); nothing when
        nothing matches well enough (the search's relevance floor, its threshold). Returns
        agent_sessions.PromptContext."""
        from memvault.learning import agent_sessions

        files.check_conversation_id(conversation)
        out = agent_sessions.PromptContext(conversation)
        prompt = (prompt or "").strip()
        if not prompt or not self.exists():
            return out
        own = agent_sessions.session_turns(self._vault, conversation, agent, session) if agent else []
        out.skipped_turns = len(own)
        clock = _time(now, "now") or files.utcnow()
        outcome = self._run_search(self._query(prompt, top_k=top_k, conversation=conversation, now=clock,
                                               skip_ids=tuple(t.id for t in own)))
        out.results = [r for r in outcome.results if not r.meta.get("unanswered")]
        out.text = agent_sessions.prompt_block(self._vault, out.results, clock)
        return out

    def store_exchange(self, *, conversation: str, agent: str, session: str | None = None,
                       transcript: str | Path | None = None, cwd: str | Path | None = None, turn: str | None = None,
                       prompt: str | None = None, reply: str | None = None, last_only: bool = True,
                       learn: bool = True, close: str | None = None, now: datetime | str | None = None):
        """Store a coding agent's exchange as two turns in one commit (the user's owing learning): read from
        its `transcript` (the exchange of `turn`, else the last one; every one not stored yet without
        last_only), else `prompt` and `reply` as given; `reply` (the agent's final text, as its hook gives
        it) wins over the transcript's. An exchange this session stored already is not stored again.
        Learning, and with `close` (an episode boundary: session-end, compact) the open episode's close,
        are queued for `hook_upkeep`, which another process runs. Returns agent_sessions.StoredExchange."""
        from memvault.learning import agent_sessions
        from memvault.learning.episodes import BOUNDARIES

        files.check_conversation_id(conversation)
        if agent not in agent_sessions.AGENTS:
            raise UsageError(f"unknown agent {agent!r} (one of {', '.join(agent_sessions.AGENTS)})", params="agent")
        if close is not None and close not in BOUNDARIES:
            raise UsageError(f"unknown episode boundary {close!r} (one of {', '.join(BOUNDARIES)})", params="close")
        exchanges: list = []
        if transcript:
            try:
                exchanges = agent_sessions.read_transcript(agent, transcript, cwd)
            except OSError as exc:
                if not prompt:
                    raise
                self._say(f"memvault: transcript not read ({transcript}: {exc.strerror or exc}); storing the prompt given")
        if last_only and exchanges:
            chosen = next((e for e in reversed(exchanges) if turn and e.turn == turn), None)
            if chosen is None and not turn:
                chosen = exchanges[-1]
            if chosen is None or (prompt and chosen.prompt.strip() != prompt.strip() and not (turn and chosen.turn == turn)):
                # The transcript is behind the hook: the prompt given, else nothing now (the session's end
                # stores every exchange not stored yet), never the reply pinned to an earlier prompt.
                chosen = agent_sessions.Exchange(prompt.strip(), turn=turn) if prompt and prompt.strip() else None
            exchanges = [chosen] if chosen is not None else []
            if not exchanges:
                self._say(f"memvault: the prompt of turn {turn} is not in {transcript} yet; the session's end stores it")
        if not exchanges and prompt and prompt.strip():
            exchanges = [agent_sessions.Exchange(prompt.strip(), turn=turn)]
        if reply and reply.strip() and exchanges:
            exchanges[-1].reply = reply.strip()
        clock = _time(now, "now") or files.utcnow()
        stored = agent_sessions.store(self._vault, exchanges, conversation, agent, session, learn=learn, now=clock)
        if stored.learning_owed or close:
            agent_sessions.queue_upkeep(self._vault, conversation, close)
        return stored

    def end_session(self, conversation: str, *, close: str = "session-end") -> None:
        """Queue the close of the conversation's open episode (and the learning owed) for `hook_upkeep`."""
        from memvault.learning import agent_sessions

        files.check_conversation_id(conversation)
        agent_sessions.queue_upkeep(self._vault, conversation, close)

    def upkeep_waiting(self) -> bool:
        """Whether upkeep a hook queued waits for `hook_upkeep`."""
        from memvault.learning import agent_sessions

        return agent_sessions.upkeep_waiting(self._vault)

    def hook_upkeep(self, on_done: Callable[[str, Any], None] | None = None) -> int:
        """Run the upkeep the hooks queued, unless another process runs it: for each conversation, learn from
        its turns still owed learning, then close its episodes that have closed (the open one too when a
        session ended or compacted). A model that is down leaves the turns waiting (the next upkeep, `learn`,
        a serve or mcp start take them). on_done(conversation, result) after each. Returns how many
        conversations were done."""
        from memvault.learning import agent_sessions

        def work(request) -> None:
            caught = self.learn(request.conversation)
            closed = self.close_episodes(request.conversation, end=request.close, now=files.utcnow(), command="hook")
            if on_done is not None:
                on_done(request.conversation, (caught, closed))

        if not self.exists():
            return 0
        return agent_sessions.run_upkeep(self._vault, work)

    # -- looking over what was learned -------------------------------------------------------
    def review(self, conversation: str | None = None, *, limit: int | None = None) -> list:
        """The learned facts not reviewed yet, newest first (review.ReviewItem: the fact, its status
        `pending` / `proposal` / `learned`, the words it came from, what it would replace or replaced);
        of one conversation, or of every one (None)."""
        from memvault.changing import review

        if conversation is not None:
            files.check_conversation_id(conversation)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UsageError(f"limit must be a whole number of at least 1, not {limit!r}")
        self._vault.require_existing()
        self._fresh_index()
        return review.waiting(self._vault, conversation, limit)

    def review_keep(self, ids: str | Iterable[str], *, text: str | None = None, now: datetime | str | None = None):
        """Keep learned facts, in one commit: a waiting one goes live, a proposal retires the facts
        of yours it names; each is marked reviewed. text: keep one fact with these words instead.
        Returns review.ReviewOutcome."""
        from memvault.changing import review

        return review.keep(self._vault, [ids] if isinstance(ids, str) else list(ids), text=text,
                           now=_time(now, "now"))

    def review_reject(self, ids: str | Iterable[str], *, reason: str | None = None,
                      now: datetime | str | None = None):
        """Reject learned facts, in one commit: each is soft-deleted with reason `rejected` (reason: why,
        in your words, kept as `deleted_note`), and the facts it retired come back. Returns
        review.ReviewOutcome."""
        from memvault.changing import review

        return review.reject(self._vault, [ids] if isinstance(ids, str) else list(ids), reason=reason,
                             now=_time(now, "now"))

    def learn(self, conversation: str | None = None, *, since: datetime | str | None = None,
              before: datetime | str | None = None, dry_run: bool = False,
              progress: Callable[[int, int], None] | None = None):
        """Learn from the user turns that learning is still owed to (`extracted: false`: a server stopped
        before its upkeep, a reply cut short, an LLM that was down), oldest first: of one conversation
        (None: every one), created at or after `since` and before `before`. dry_run: list them, call no
        model. Returns learn.CatchUp; an LLM that is down stops it (`error`), the rest waits."""
        from memvault.learning import learn

        if conversation is not None:
            files.check_conversation_id(conversation)
        if not self.exists():
            return learn.CatchUp(dry_run=dry_run)
        self._fresh_index()
        turns = learn.unlearned_turns(self._vault, conversation, _time(since, "since"), _time(before, "before"))
        if dry_run or not turns:
            return learn.CatchUp(turns=turns, dry_run=dry_run)
        return learn.catch_up(self._learner("learn"), turns, progress)

    # -- upkeep ------------------------------------------------------------------------------
    def reconcile(self, conversation: str = DEFAULT_CONVERSATION, *, all_conversations: bool = False,
                  dry_run: bool = False) -> ReconcileOutcome:
        """Find clusters of near-duplicate or conflicting facts and let the LLM decide which stay.
        The model is asked without the lock; the plan is applied in one commit, skipping memories
        that changed meanwhile. An LLM that is down or answers garbage raises LLMError."""
        from memvault.learning import consolidate
        from memvault.store.llm import LLMConfig

        files.check_conversation_id(conversation)
        self._vault.require_existing()
        index = self._fresh_index()
        conversations = [conversation]
        if all_conversations:
            conversations = sorted({m.conversation_id for m in self._vault.iter_memories(roles=("memory",))})
        cfg = LLMConfig.from_settings(self.settings)
        plans = [p for c in conversations for p in consolidate.plan(index, cfg, c, self.settings.reconcile_mode)]
        outcome = ReconcileOutcome(plans, dry_run)
        if not dry_run and any(step.decision != "KEEP" for step in outcome.steps):
            with self._vault.change("reconcile") as change:
                consolidate.apply(change, plans)
            outcome.events = change.events
        return outcome

    def summarize(self, conversation: str = DEFAULT_CONVERSATION, *, rebuild: bool = False,
                  style: str = "conversation", now: datetime | str | None = None):
        """Update the rolling summary with what is new since it was written, or rebuild it from every
        entry (depth by size). The model is asked without the lock. Returns summaries.SummaryOutcome."""
        from memvault.learning import summaries
        from memvault.store.llm import LLMConfig
        from memvault.learning.prompts import STYLES

        files.check_conversation_id(conversation)
        if style not in STYLES:
            raise UsageError(f"unknown style {style!r} (one of {', '.join(STYLES)})")
        self._vault.require_existing()
        cfg = LLMConfig.from_settings(self.settings)
        if rebuild:
            outcome = summaries.plan_rebuild(self._vault, cfg, conversation, style)
        else:
            outcome = summaries.plan_update(self._vault, cfg, conversation)
        if outcome.text and outcome.kind not in ("none", "unchanged"):
            with self._vault.change("summarize") as change:
                summaries.write(change, outcome, now=_time(now, "now"))
                change.title = f"{outcome.kind} summary ({conversation})"
        return outcome

    def reindex(self, full: bool = False, progress: Callable[[int, int], None] | None = None):
        """Bring the index in line with the files and commit the hand edits it accepted; `full`
        rebuilds it. progress(done, total) is called while embedding. Returns index.SyncReport."""
        from memvault.store import reindex

        self._vault.require_existing()
        with self._read_lock:
            return reindex.reindex(self._vault, full=full, progress=progress)

    def sync(self, remote: str | None = None, *, push: bool = True, push_secrets: bool = False,
             progress: Callable[[str, int, int], None] | None = None):
        """One vault on several machines (docs/design.md, "One vault on several machines"): commit the
        hand edits, fetch from the git remote (`remote`, else the branch's upstream, else origin),
        bring its changes in (a fast-forward, or a merge whose conflicts are settled by memvault's
        rules: never a conflict marker in a file), re-index only the files that changed, and push
        (unless push=False). Returns moving.sync.SyncResult. A remote that is missing, unreachable, refuses
        the credentials or rejects the push raises RemoteError (its `result`: what was done before);
        nothing is lost, and the next sync finishes the job. Commits that hold a secret are not pushed
        (SecretsFound, naming each file and line) unless push_secrets (docs/design.md, "Secrets")."""
        from memvault.moving import sync as remotes

        return remotes.sync(self._vault, remote, push=push, push_secrets=push_secrets, progress=progress,
                            index_lock=self._read_lock)

    def scrub(self, *, rewrite_history: bool = False):
        """Replace the secrets (API keys, tokens, passwords, private keys) already in the vault's memory
        files with placeholders, as one commit, and say where git history still holds them; with
        rewrite_history, make the commits not pushed yet again without them (the old history kept under
        a backup ref). Returns scrub.ScrubResult (docs/design.md, "Secrets")."""
        from memvault.changing import scrub

        with self._read_lock:
            return scrub.scrub(self._vault, rewrite_history=rewrite_history)

    def check(self):
        """Drift between the files and the index, writing nothing (index.SyncReport)."""
        from memvault.store import reindex

        self._vault.require_existing()
        return reindex.check(self._vault)

    def watch(self, on_report: Callable[[Any], None], stop: threading.Event | None = None,
              on_start: Callable[[], None] | None = None) -> None:
        """Reindex whenever files under entries/ change, until `stop` is set (or Ctrl-C)."""
        from memvault.store import reindex
        from memvault.store.native_memory import settle_for_long_life

        settle_for_long_life()  # a long-lived process (native_memory.py)
        self._vault.require_existing()
        reindex.watch(self._vault, on_report, stop=stop, on_start=on_start)

    def warm(self, search: bool = True) -> None:
        """Load now what the first search would load (the embedding model, the reranker, the index
        in step with the files, its full-text index and LanceDB's caches), so that a server's first
        call does not wait for it. Optional: every operation loads what it needs on first use.
        search=False: the models and libraries only (the CLI's agent: a search would take the
        vault's notices, a missing reranker's, as said before the user's first command said them)."""
        from memvault.store import secret_scan

        index = self._vault.index
        index.embedder.embed(["warm-up"])  # the first inference allocates ONNX Runtime's buffers
        secret_scan.warm(self._vault)  # a server's first chat does not wait for detect-secrets' import
        if not search:
            from memvault.reading.retrieval import load_reranker

            load_reranker(self.settings, warn=lambda reason: None)  # each search says it, as cold
            if self._vault.exists():
                index.table()  # LanceDB's import and its first open
            return
        if self._vault.exists():
            # One search of every conversation: it loads the reranker (saying so once if it cannot),
            # opens the table and reads what a first query reads.
            self._run_search(self._query("warm up", all_conversations=True, top_k=1))

    def warm_llm(self) -> None:
        """Import the LLM library now (litellm: seconds), not during a server's first request nor in
        two request threads at once."""
        from memvault.store.llm import _lib

        _lib()

    def llm_endpoint(self) -> str:
        """The LLM endpoint's URL as it may be shown (credentials left out)."""
        from memvault.store.llm import display_url

        return display_url(self.settings.llm_base_url)

    def hold_lock(self, timeout: float, holder: str):
        """The vault lock, as a context manager: a long-running face that is stopping takes it (and
        keeps it until the process is gone), so that no thread of its is half way through a change."""
        from memvault.store.lock import vault_lock

        return vault_lock(self._vault.lock_path, timeout=timeout, holder=holder)

    # -- internals -------------------------------------------------------------------------
    def _query(self, text: str, *, kinds=None, since=None, until=None, now=None, as_of=None, retriever: str = "hybrid",
               conversation: str = DEFAULT_CONVERSATION, tags: Iterable[str] = (), **options: Any):
        from memvault.reading.retrieval import Query

        files.check_conversation_id(conversation)
        if retriever not in ("hybrid", "dense", "bm25"):
            raise UsageError(f"unknown retriever {retriever!r} (hybrid, dense or bm25)")
        roles = files.roles_for_kinds(kinds)
        extra = {"roles": roles} if roles else {}
        moment = _time(as_of, "as_of")
        return Query.from_settings(self.settings, text, conversation=conversation, tags=tuple(tags or ()),
                                   since=_time(since, "since"), until=_time(until, "until"),
                                   now=_time(now, "now") or moment, as_of=moment,
                                   use_dense=retriever != "bm25", use_bm25=retriever != "dense", **extra, **options)

    def _run_search(self, query):
        import time

        from memvault.reading.retrieval import read

        self._vault.require_existing()
        started = time.perf_counter()
        index = self._fresh_index()
        if query.as_of is not None:
            from memvault.reading.as_of import index_at

            with index_at(self._vault, index, query.as_of) as held:
                return read(held, query, self.settings, self._say, self._llm_order,
                            sync_seconds=time.perf_counter() - started)
        try:
            return read(index, query, self.settings, self._say, self._llm_order,
                        sync_seconds=time.perf_counter() - started)
        except RuntimeError as exc:
            if not index.table_gone(exc):
                raise
            index.refresh()  # another process's upkeep pruned the version this handle held
            return read(index, query, self.settings, self._say, self._llm_order,
                        sync_seconds=time.perf_counter() - started)

    def _llm_order(self, question: str, results: list) -> list:
        """The LLM's order (setting llm_rerank); one per vault object, so a failure is said once."""
        if self._llm_orderer is None:
            from memvault.reading.llm_rerank import LLMOrder

            self._llm_orderer = LLMOrder(self.settings, self._say)
        return self._llm_orderer(question, results)

    def _fresh_index(self):
        """The index, in step with the files before a read (store/reindex.py, fresh_index)."""
        from memvault.store.reindex import fresh_index

        return fresh_index(self._vault, self._watcher, self._read_lock, self._say)


def _owed_learning(memory: Memory, turns: list[Memory]) -> Memory:
    """A user turn stored to be learned from: `extracted: false` until it has been (else as it is).
    Each chat turn is kept in `turns` for the learning that follows the add."""
    if memory.role == "user" and files.EXTRACTED not in memory.extra:
        memory.extra[files.EXTRACTED] = False
    if memory.role in ("user", "assistant"):
        turns.append(memory)
    return memory


def _time(value: datetime | str | None, name: str) -> datetime | None:
    """An ISO 8601 option as an aware datetime (naive: UTC); a bad one is a usage error naming it."""
    if value is None:
        return None
    try:
        return files.parse_time(value, name)
    except ValueError as exc:
        raise UsageError(str(exc), params=name) from None
