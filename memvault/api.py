"""The front door: memvault as a Python library (docs/design.md, "The library API and its faces").

    import memvault

    vault = memvault.open_vault("~/notes/memory")        # or None: $MEMVAULT_DIR, else the default
    vault.add("My wife is Anne")
    outcome = vault.search("what is my wife's name", top_k=3)
    print(outcome.results[0].text, outcome.results[0].score)

Every face (the CLI, `memvault serve`, `memvault mcp`) is a thin layer over `Memvault`: an operation
exists once, in the module each method names; a method checks its arguments and delegates. Arguments
are plain values, results dataclasses with `to_json()`, which is what the faces print as JSON. Every
failure is a `MemvaultError` (an LLM that is down included), whose message is one line.

A `Memvault` is cheap to open: models and the index load on first use and then stay loaded, so a
long-lived process (a server) pays for them once. `open_vault(watch=True)` also watches the folder, so
that a warm process sees hand edits and other processes' writes at its next read without walking
every file before each one.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from memvault.errors import NothingGiven, UsageError
from memvault.store import files
from memvault.store.files import DEFAULT_CONVERSATION, Memory, option_time as _time

# Each method imports what it delegates to inside itself (docs/design.md, "Layers": moving, changing,
# learning, reading, store), on purpose: a cold `memvault search` or `add` then loads only what that
# command needs (`python -X importtime`), and `import memvault` loads none of it.

__all__ = ["Memvault", "open_vault", "clone_vault", "project_folder"]

Notice = Callable[[str], None]
# Result classes that live with their operations, importable from here as before (loaded when asked for).
_RESULTS = {"Added": "memvault.store.ingest", "SessionView": "memvault.learning.sessions",
            "ReconcileOutcome": "memvault.learning.consolidate", "EpisodesOutcome": "memvault.learning.episodes"}


def __getattr__(name: str):
    if name in _RESULTS:
        import importlib

        return getattr(importlib.import_module(_RESULTS[name]), name)
    raise AttributeError(f"module 'memvault.api' has no attribute {name!r}")


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
    vault.settle_interrupted()  # a change a killed memvault left half done: rolled back or forward first
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


def keep_index_handles() -> None:
    """For a process that opens the vault anew for each command (the agent, faces/agent.py): from now on each
    index's LanceDB connection and open table are kept between the commands, taken by each at the table's
    latest version (store/index.py `keep_handles`; docs/design.md, "The agent")."""
    from memvault.store.index import keep_handles

    keep_handles()


def project_folder(cwd: str | Path) -> Path:
    """The project a coding agent works in from `cwd`: the git work tree holding it, else cwd itself
    (`memvault setup --scope project` writes there; docs/design.md, "Coding agents")."""
    from memvault.learning.agent_sessions import project_root

    return project_root(Path(cwd))


class Memvault:
    """One vault: its memories, index, models and LLM, behind one method per operation.

    The operations are listed in docs/design.md, section 11 (tests/test_docs.py holds the list to this
    class). A few members are for the faces rather than for scripts, and say so: `check_extract`,
    `log_for_model`, `warm`, `warm_llm`, `llm_endpoint`, `hold_lock`."""

    def __init__(self, vault, watch: bool = False):
        from memvault.reading.searching import Reader

        self._vault = vault
        self._watcher = None
        if watch:
            from memvault.store.reindex import FolderWatch

            self._watcher = FolderWatch(vault)
        self._reader = Reader(vault, self._watcher)

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

    def _fresh_index(self):
        return self._reader.fresh_index()

    def _learner(self, command: str, summarize: bool | None = None):
        """The one learning path (learn.Learner) for a command of this vault: the index brought in
        step before each plan, warnings through the vault's notices."""
        from memvault.learning.learn import Learner
        from memvault.store.llm import LLMConfig

        return Learner(self._vault, LLMConfig.from_settings(self.settings), command, warn=self._say,
                       refresh=self._fresh_index, summarize=summarize)

    def _llm(self):
        from memvault.store.llm import LLMConfig

        return LLMConfig.from_settings(self.settings)

    # -- writing ---------------------------------------------------------------------------
    def add(self, text: str | Iterable[str], *, conversation: str = DEFAULT_CONVERSATION, kind: str = "fact",
            tags: Iterable[str] = (), source: str | None = None, rationale: str | None = None,
            alternatives: Iterable[str] = (), meta: Mapping[str, Any] | None = None,
            created_at: datetime | str | None = None, each_line: bool = False, allow_duplicate: bool = False,
            extract: bool = False, progress: Callable[[int, int], None] | None = None):
        """Store text verbatim as memories (one per string; with each_line, one per non-empty line,
        list markers stripped), indexed and committed at once. A text a live memory of the same
        conversation and kind already holds word for word is not stored again (so a cron job can
        add the same file every night) unless allow_duplicate. extract: let the LLM pick out the facts
        instead (`add_extracted`; kind fact, none of the add's own keys). Returns an ingest.Added: the
        stored memories (iterate it), the duplicates, the commit; with extract, `learned` (its changes)."""
        from memvault.store import ingest

        if extract:
            self.check_extract(kind, tags=tags, source=source, rationale=rationale, alternatives=alternatives,
                               allow_duplicate=allow_duplicate)
            learned = self.add_extracted(text, conversation=conversation, now=created_at, each_line=each_line)
            return ingest.Added([e.memory for e in learned.events if e.action == "ADD"], learned=learned)
        pieces = [text] if isinstance(text, str) else list(text)
        if each_line:
            pieces = [line for piece in pieces for line in ingest.split_lines(piece)]
        pieces = [p for p in pieces if p and p.strip()]
        if not pieces:
            raise NothingGiven("nothing to add: the text is empty", params="text")
        memories = ingest.new_memories(pieces, conversation=conversation, kind=kind, tags=tags, source=source,
                                       rationale=rationale, alternatives=alternatives, meta=meta,
                                       created_at=_time(created_at, "created_at"))
        from memvault.store import secret_scan

        secret_scan.refuse_secret_id(self._vault, conversation)  # before the vault is made or locked
        return self.add_memories(memories, allow_duplicate=allow_duplicate, progress=progress)

    def add_jsonl(self, text: str, origin: str = "stdin", *, allow_duplicate: bool = False, extract: bool = False,
                  progress: Callable[[int, int], None] | None = None, **defaults: Any):
        """Store one memory per JSON line ({"text", "conversation_id"?, "created_at"?, "kind"?, "role"?,
        "tags"?, "source"?, "rationale"?, "alternatives"?, "meta"?}); every line is checked before
        anything is written. defaults: the same keys, for lines that leave them out. Duplicates as for
        `add`. A line with "role": "user" or "assistant" is a chat turn; with extract, the turns are
        learned from (per message, or per episode in extraction_mode predict-calibrate) and cut into
        episodes, the batch's last one closed (`Added.learned`, `Added.episodes`). The memories are made,
        written and indexed a batch at a time (one commit), and returned as vault.Stored records (id,
        path, ...; `read()` gives a memory whole), so that a 100,000-line add never holds them all."""
        from memvault.errors import MemvaultError
        from memvault.learning import learn
        from memvault.store import ingest

        from memvault.store import secret_scan

        count, turns = ingest.check_jsonl(text, origin, defaults,
                                          check_id=lambda conversation: secret_scan.refuse_secret_id(self._vault,
                                                                                                     conversation))
        if not count:
            raise MemvaultError(f"nothing to add: {origin} has no JSON lines")
        if extract and not turns:
            raise UsageError(f"extract with jsonl learns from chat turns: {origin} has no line with "
                             '"role": "user" or "assistant"', params=("extract", "jsonl"))
        memories = ingest.iter_jsonl(text, origin, defaults)
        given: list[Memory] = []
        if extract:  # learning is owed to each user turn until it is done (docs/design.md, "The write path")
            memories = (learn.owed_learning(m, given) for m in memories)
        added = self.add_memories(memories, allow_duplicate=allow_duplicate, progress=progress, expected=count)
        if extract:  # the turns whole (learning reads their texts and marks them), those that were stored
            stored = {m.id for m in added}
            added.learned, added.episodes = learn.learn_from_batch(
                self._learner("add", summarize=False), [m for m in given if m.id in stored],
                lambda conversation, latest: self.close_episodes(conversation, end="import", now=latest,
                                                                 command="add", strict=True))
        return added

    def add_memories(self, memories: Iterable[Memory], *, allow_duplicate: bool = True,
                     progress: Callable[[int, int], None] | None = None, expected: int | None = None):
        """Store memories made with `files.new_memory` (a list, or an iterator that makes them as they are
        written) in one commit; with allow_duplicate=False, not those a live memory already holds word
        for word (same conversation and kind), nor a second copy within them. Returns ingest.Added."""
        from memvault.store import ingest

        return ingest.add_memories(self._vault, memories, allow_duplicate=allow_duplicate, progress=progress,
                                   expected=expected)

    @staticmethod
    def check_extract(kind: str = "fact", **add_options: Any) -> None:
        """For the faces: refuse what does not go with extract (a kind other than fact; tags, source,
        rationale, alternatives, allow_duplicate) before anything is opened; `add` checks it too."""
        from memvault.store.ingest import check_extract

        check_extract(kind, **add_options)

    def add_extracted(self, text: str | Iterable[str], *, conversation: str = DEFAULT_CONVERSATION,
                      now: datetime | str | None = None, each_line: bool = False):
        """Let the LLM extract facts from the user's words and reconcile them with what is known:
        one commit per text (with each_line, per non-empty line). Returns a `learn.Learned` with every
        change (ADD, UPDATE, REPLACE, DELETE, EVICT). An LLM that is down raises LLMError; nothing is
        written for that text."""
        from memvault.learning import learn

        files.check_conversation_id(conversation)
        if each_line and isinstance(text, str):
            from memvault.store.ingest import split_lines

            text = split_lines(text)
        texts = [t for t in ([text] if isinstance(text, str) else list(text)) if t and t.strip()]
        if not texts:
            raise NothingGiven("nothing to add: the text is empty", params="text")
        for piece in texts:
            files.check_text(piece, "the text")
        return learn.learn_from_texts(self._learner("add"), texts, conversation, _time(now, "now"))

    def edit(self, id_or_prefix: str, text: str | None = None, *, editor: list[str] | None = None,
             retry: Callable[[str], bool] | None = None, expected: str | None = None):
        """Change a memory: to `text` (the front matter kept), or in an editor (`$VISUAL`/`$EDITOR`
        unless `editor` is given) on a copy that must still be a valid memory. Indexed and committed.
        expected: the text written over (EditConflict if it changed since). Returns manage.EditResult."""
        from memvault.changing import manage

        if text is not None:
            return manage.set_text(self._vault, id_or_prefix, text, expected=expected)
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
                 dry_run: bool = False, now: datetime | str | None = None):
        """The conversation's episodes (docs/design.md, "Episodes"), and the turns not in one yet, cut
        where they would be. Every episode that has closed (a time gap, a clear, a topic shift) is
        written now, with learning in extraction_mode predict-calibrate; close: the open one too.
        rebuild: cut the turns the episodes cover again (old episode files soft-deleted with
        replaced_by; nothing learned again). dry_run: say what would be written, call no model,
        write nothing. Returns episodes.EpisodesOutcome."""
        from memvault.learning import episodes

        files.check_conversation_id(conversation)
        self._vault.require_existing()
        return episodes.look_over(self._vault, self._llm(), conversation, now=_time(now, "now") or files.utcnow(),
                                  refresh=self._fresh_index, warn=self._say, close_open=close, rebuild_them=rebuild,
                                  dry_run=dry_run)

    def close_episodes(self, conversation: str, *, end: str | None, now: datetime, command: str,
                       strict: bool = False) -> list:
        """Write the conversation's episodes that have closed (the last one too, when `end` says why),
        learning from them in extraction_mode predict-calibrate. A model that fails is a warning (strict:
        an LLMError): the turns stay, and the next close (a chat, `memvault episodes`) takes them up."""
        from memvault.learning import episodes

        return episodes.close_or_warn(self._vault, self._llm(), conversation, now=now, end=end, command=command,
                                      refresh=self._fresh_index, warn=self._say, strict=strict)

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
                                          _time(since, "since"), dry_run)
        return importing.import_and_learn(
            self._vault, options, progress, self._say, self._fresh_index,
            lambda conversation, when: self.close_episodes(conversation, end="import", now=when, command="import",
                                                           strict=True))

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

        from memvault.reading.as_of import memory_at

        return memory_at(self._vault, manage.find(self._vault, id_or_prefix), _time(as_of, "as_of"))

    def recent(self, conversation: str | None = None, *, limit: int = 20, kinds: Iterable[str] | None = None,
               tags: Iterable[str] = (), since: datetime | str | None = None, until: datetime | str | None = None,
               deleted: bool = False, as_of: datetime | str | None = None, cursor: str | None = None):
        """The newest live memories, newest first: of one conversation (None: every conversation),
        of some kinds (fact, note, decision, turn, episode; None: all of them), with all these tags,
        created within since..until, at most `limit`; with deleted, the deleted ones instead; with
        as_of, those the vault held at that moment (deleted later: as they were then). Found by file
        name (`<ts>__<id>.md` sorts by creation time), so only the files returned are read (and
        those a tag filter must look into); no index, no model. `memvault ls` prints it.

        A page at a time: the order is creation time, then id (both newest/highest first), and
        the result is a listing.Page, a list of the memories with `next_cursor`: None on the last
        page, else an opaque string that, given back as `cursor` with the same filters, returns
        the page after this one, exactly, also when many memories share one creation time. A
        cursor no listing gave is a UsageError naming `cursor`. `marks`: listing.MARKS per memory."""
        from memvault.reading import listing

        if conversation is not None:
            files.check_conversation_id(conversation)
            self._reader.say_if_unknown(conversation)
        return listing.recent(self._vault, conversation, limit=limit, roles=files.roles_for_kinds(kinds), tags=tags,
                              since=_time(since, "since"), until=_time(until, "until"), deleted=deleted,
                              as_of=_time(as_of, "as_of"), cursor=cursor)

    def search(self, query: str, *, top_k: int | None = None, conversation: str | None = None,
               all_conversations: bool = False, kinds: Iterable[str] | None = None, tags: Iterable[str] = (),
               since: datetime | str | None = None, until: datetime | str | None = None,
               now: datetime | str | None = None, rerank: bool = True, recency_weight: float | None = None,
               mmr_lambda: float | None = None, threshold: float | None = None, retriever: str = "hybrid",
               relevance_floor: float | None = None, session_weight: float | None = None,
               as_of: datetime | str | None = None):
        """The whole read path: dense + BM25 candidates from the conversation and `global` (or every
        conversation), cross-encoder rerank where one is available, the session's lift, recency, MMR
        diversity; without a reranker, memories that match the query too little (relevance_floor)
        are left out. conversation: None is `global`; with all_conversations, none may be named. as_of: search what the vault held at that moment (memories created later
        absent, those deleted or replaced later present; `now` defaults to it).
        Options left None come from the settings. Returns a retrieval.SearchOutcome. An empty query is
        NothingGiven (every face: a search for nothing found nothing, silently)."""
        return self._reader.search(query, top_k=top_k, conversation=conversation, all_conversations=all_conversations,
                                   kinds=kinds, tags=tags, since=since, until=until, now=now, as_of=as_of,
                                   rerank=rerank, recency_weight=recency_weight, mmr_lambda=mmr_lambda,
                                   threshold=threshold, retriever=retriever, relevance_floor=relevance_floor,
                                   session_weight=session_weight)

    def search_many(self, requests: Iterable[Mapping[str, Any]], *, origin: str = "queries",
                    **defaults: Any) -> Iterator[tuple[Any, Any]]:
        """Many searches over one loaded index: each request a mapping with "query" and optionally "qid",
        "conversation_id", "now", "k" (`search --queries` reads them from JSON lines); `defaults`: `search`'s
        options for all. Yields (qid, SearchOutcome) in order; a bad request: a UsageError naming its number."""
        return self._reader.search_many(requests, origin, **defaults)

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
        from memvault.reading import history

        return history.log(self._vault, id_or_prefix, limit=limit, since=since, until=until, max_changes=max_changes)

    def log_for_model(self, id_or_prefix: str | None = None, *, limit: int | None = None,
                      max_changes: int | None = None) -> list[dict]:
        """For the faces: `log` as JSON, each secret git history still holds (from before it was withheld)
        shown as its placeholder: what a model may be shown (MCP's memory_history)."""
        from memvault.store import secret_scan

        entries = self.log(id_or_prefix, limit=limit, max_changes=max_changes)
        return [secret_scan.redact_history(self, entry.to_json()) for entry in entries]

    def details(self, id_or_prefix: str):
        """One memory whole (details.MemoryDetails): links both ways, its story from git with each diff."""
        from memvault.reading import details

        return details.details(self._vault, id_or_prefix)

    def conversation(self, conversation: str = DEFAULT_CONVERSATION, *, episodes: int = 20):
        """One conversation at a glance (overview.ConversationView): counts, summary, episodes, review."""
        from memvault.learning import overview

        return overview.conversation(self._vault, conversation, episodes)

    def redact(self, text: str) -> str:
        """For the faces: `text` with each secret as its placeholder (stored_text: what a page may show)."""
        from memvault.store import secret_scan

        return secret_scan.stored_text(self._vault, text)

    def conversations(self) -> list:
        """Every conversation with its live memories counted by kind, its deleted ones, its newest
        activity and whether it has a summary, newest first (browse.ConversationInfo items)."""
        from memvault.reading import browse

        self._vault.require_existing()
        return browse.conversations(self._vault)

    def stats(self):
        """The vault in numbers (browse.Stats): memories by kind and conversation, the index's rows and
        state, the models, what waits for review, the last commit, disk use."""
        from memvault.reading import browse

        self._vault.require_existing()
        return browse.stats(self._vault)

    def models(self, download: bool = False):
        """The embedding model and the reranker (models.ModelsStatus): name, whether they load, and why
        not. download: fetch them into fastembed's cache (the only network access memvault makes on its
        own account)."""
        from memvault.store.models import status

        return status(self.settings, download)

    # -- chat --------------------------------------------------------------------------------
    def chat(self, message: str, *, conversation: str = DEFAULT_CONVERSATION, stream: bool = True,
             learn: bool = True, use_memory: bool = True, now: datetime | str | None = None,
             model: str | None = None, top_k: int | None = None, history: list[dict] | None = None,
             user_message: Mapping[str, Any] | None = None, llm_options: Mapping[str, Any] | None = None,
             forward=None, after_user: list[dict] | None = None, resent: bool = False):
        """Start an exchange with the LLM, memories injected. Returns a chat.ChatTurn: iterate it
        for the reply's text pieces (both turns are stored and committed when it ends), then call
        `.finish()` for the memory upkeep and the chat.ChatResult. `ask` does all of it at once.

        history: the messages before this one as a client keeps them (OpenAI shape), sent as they
        are instead of memvault's own session. user_message: with history, the client's own message
        object for this message (its content may carry images besides `message`, its text), sent as
        it is. llm_options: sampling options for the model (max_tokens, top_p, stop, temperature...).
        forward (a proxy: store/upstream.Forward): the client's request, handed to the upstream as it
        was sent with the memory block added (not through litellm); iterating the turn gives the
        upstream's answer or its stream's events as they came; the reply's text and tool calls are
        stored. The face says what its client got in `turn.delivery` (chat.Delivery). after_user: with history, a tool round after the message (the assistant's
        tool calls, the results), sent after it; the message's turn stored already is not stored again.
        resent: with history, the client marks this request its retry of the message: the newest user
        turn with the same text is its turn even when answered since (the client never got that reply)."""
        from memvault.learning import chat

        options = chat.ChatOptions(conversation=conversation, learn=learn, use_memory=use_memory, stream=stream,
                                   now=_time(now, "now"), top_k=top_k, model=model,
                                   history=list(history) if history is not None else None,
                                   user_message=dict(user_message) if user_message is not None else None,
                                   llm_options=dict(llm_options or {}), forward=forward,
                                   after_user=list(after_user) if after_user else None, resent=resent)
        return chat.begin(self._vault, message, options, self._reader.chat_memories(conversation), warn=self._say,
                          refresh=self._fresh_index)

    def llm_models(self) -> list[dict[str, Any]]:
        """The models the configured LLM endpoint serves (its `/models` list, OpenAI shape: each with
        an `id`). LLMError naming the endpoint when it cannot be asked."""
        from memvault.store import llm

        return llm.list_models(self._llm())

    def relay(self, dialect, method: str, path: str, body: Mapping[str, Any] | None = None,
              headers: Mapping[str, str] | None = None):
        """A proxy's request that carries no message to remember (Anthropic's count_tokens, its model
        list), handed to the upstream of `dialect` (store/upstream.Dialect) as it came (or answered for
        llm_model with anthropic_upstream = litellm), `path` with its query; its answer as it came (upstream.Answer), an error status too. LLMError when the upstream
        could not be reached."""
        from memvault.store import upstream

        dialect = dialect.upstream(self.settings)
        cfg = dialect.config(self._llm(), self.settings)
        return upstream.relay(cfg, dialect, method, path, dict(body) if body is not None else None, dict(headers or {}))

    def ask(self, message: str, **options: Any):
        """`chat` in one call, without streaming: the reply, stored, and the upkeep done."""
        return self.chat(message, stream=False, **options).finish()

    def session(self, conversation: str = DEFAULT_CONVERSATION, now: datetime | str | None = None):
        """The conversation's current chat session (what the next `chat` will send): sessions.SessionView."""
        from memvault.learning import sessions

        files.check_conversation_id(conversation)
        return sessions.view(self._vault, conversation, _time(now, "now") or files.utcnow())

    def clear_session(self, conversation: str = DEFAULT_CONVERSATION, now: datetime | str | None = None) -> None:
        """Start a fresh chat session: later chats do not see the earlier turns (memories still apply)."""
        from memvault.learning import chat

        files.check_conversation_id(conversation)
        clock = _time(now, "now") or files.utcnow()
        chat.clear_session(self._vault, conversation, clock)
        self.close_episodes(conversation, end="session-clear", now=clock, command="chat")

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

        return agent_sessions.context_for(self._vault, conversation, max_tokens, _time(now, "now") or files.utcnow())

    def prompt_context(self, prompt: str, *, conversation: str = DEFAULT_CONVERSATION, agent: str | None = None,
                       session: str | None = None, top_k: int | None = None, now: datetime | str | None = None):
        """The memories that fit a coding agent's prompt, as the chat's dated block: the conversation's and
        `global`'s, the turns the agent's `session` stored left out (the agent has them); nothing when
        nothing matches well enough (the search's relevance floor, its threshold). Returns
        agent_sessions.PromptContext."""
        from memvault.learning import agent_sessions

        return agent_sessions.prompt_context(self._vault, self._reader, prompt, conversation=conversation,
                                             agent=agent, session=session, top_k=top_k,
                                             now=_time(now, "now") or files.utcnow())

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

        return agent_sessions.store_exchange(
            self._vault, conversation=conversation, agent=agent, session=session, transcript=transcript, cwd=cwd,
            turn=turn, prompt=prompt, reply=reply, last_only=last_only, learn=learn, close=close,
            now=_time(now, "now") or files.utcnow(), warn=self._say)

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
            raise UsageError(f"limit must be a whole number of at least 1, not {limit!r}", params="limit")
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

    def review_decide(self, *, keep: Iterable[str] = (), reject: Iterable[str] = (), text: str | None = None,
                      reason: str | None = None):
        """`review_keep` or `review_reject`, by the rules every face gives (review.decide: ids to keep or to
        reject, one of the two; `text` only with keep, `reason` only with reject). review.ReviewOutcome."""
        from memvault.changing import review

        return review.decide(self._vault, keep, reject, text=text, reason=reason)

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
                  dry_run: bool = False):
        """Find clusters of near-duplicate or conflicting facts and let the LLM decide which stay.
        The model is asked without the lock; the plan is applied in one commit, skipping memories
        that changed meanwhile. An LLM that is down or answers garbage raises LLMError. Returns
        consolidate.ReconcileOutcome."""
        from memvault.learning import consolidate

        files.check_conversation_id(conversation)
        self._vault.require_existing()
        return consolidate.reconcile(self._vault, self._fresh_index(), self._llm(), conversation, all_conversations,
                                     self.settings.reconcile_mode, dry_run)

    def summarize(self, conversation: str = DEFAULT_CONVERSATION, *, rebuild: bool = False,
                  style: str = "conversation", now: datetime | str | None = None):
        """Update the rolling summary with what is new since it was written, or rebuild it from every
        entry (depth by size). The model is asked without the lock. Returns summaries.SummaryOutcome."""
        from memvault.learning import summaries
        from memvault.learning.prompts import STYLES

        files.check_conversation_id(conversation)
        if style not in STYLES:
            raise UsageError(f"unknown style {style!r} (one of {', '.join(STYLES)})", params="style")
        self._vault.require_existing()
        return summaries.summarize(self._vault, self._llm(), conversation, rebuild, style, _time(now, "now"))

    def reindex(self, full: bool = False, progress: Callable[[int, int], None] | None = None):
        """Bring the index in line with the files and commit the hand edits it accepted; `full`
        rebuilds it. progress(done, total) is called while embedding. Returns index.SyncReport."""
        from memvault.store import reindex

        self._vault.require_existing()
        with self._reader.lock:
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
                            index_lock=self._reader.lock)

    def scrub(self, *, rewrite_history: bool = False):
        """Replace the secrets (API keys, tokens, passwords, private keys) already in the vault's memory
        files with placeholders, as one commit, and say where git history still holds them; with
        rewrite_history, make the commits not pushed yet again without them (the old history kept under
        a backup ref). Returns scrub.ScrubResult (docs/design.md, "Secrets")."""
        from memvault.changing import scrub

        with self._reader.lock:
            return scrub.scrub(self._vault, rewrite_history=rewrite_history)

    def check(self):
        """Drift between the files and the index, writing nothing (index.SyncReport)."""
        from memvault.store import reindex

        self._vault.require_existing()
        return reindex.check(self._vault)

    def watch(self, on_report: Callable[[Any], None], stop=None, on_start: Callable[[], None] | None = None) -> None:
        """Reindex whenever files under entries/ change, until `stop` (a threading.Event) is set (or Ctrl-C)."""
        from memvault.store import reindex
        from memvault.store.native_memory import settle_for_long_life

        settle_for_long_life()  # a long-lived process (native_memory.py)
        self._vault.require_existing()
        reindex.watch(self._vault, on_report, stop=stop, on_start=on_start)

    # -- for the faces -------------------------------------------------------------------------
    def warm(self, search: bool = True) -> None:
        """For the faces: load now what the first search would load (the embedding model, the reranker,
        the index in step with the files, its full-text index and LanceDB's caches), so that a server's
        first call does not wait for it. Optional: every operation loads what it needs on first use.
        search=False: the models and libraries only (the CLI's agent: a search would take the vault's
        notices, a missing reranker's, as said before the user's first command said them)."""
        self._reader.warm(search)

    def catch_up(self) -> None:
        """For the faces: bring the index in step with the files now (this process's writes, another's,
        a hand edit), for a long-lived face that is idle, so that its next request does not wait for it.
        Costs little when nothing changed: one git status, none in a process that watches the folder.
        A long-lived process's copy of the index (dense_copy.py) reads the new rows now too."""
        if self._vault.exists():
            index = self._fresh_index()
            table = index.table()
            if getattr(index, "dense_copy", None) is not None and table is not None:
                index.dense_copy.current(table)

    def warm_llm(self) -> None:
        """For the faces: import the LLM library now (litellm: seconds), not during a server's first
        request nor in two request threads at once."""
        from memvault.store.llm import _lib

        _lib()

    def llm_endpoint(self) -> str:
        """For the faces: the LLM endpoint's URL as it may be shown (credentials left out)."""
        from memvault.store.llm import display_url

        return display_url(self.settings.llm_base_url)

    def hold_lock(self, timeout: float, holder: str):
        """For the faces: the vault lock, as a context manager: a long-running face that is stopping takes it
        and keeps it until the process is gone, so that no thread of its is mid-change (faces/lifecycle.py)."""
        from memvault.store.lock import vault_lock

        return vault_lock(self._vault.lock_path, timeout=timeout, holder=holder)
