"""`memvault mcp`: the vault as a Model Context Protocol server over stdio (docs/design.md, 11).

A face, like the CLI: each tool checks and adapts its arguments, makes one `Memvault` call and
returns plain JSON (a pydantic model, so the tool also publishes an output schema). Failures are
MemvaultErrors with one line; each becomes an MCP error result with that line, and the server goes
on serving. The vault is opened once with watch=True: models and the index stay loaded (a thread
loads them once the client has listed the tools), and the next call sees hand edits and other
processes' writes.

The SDK is the official `mcp` package, 2.x (pyproject pins `mcp>=2.3,<3`; its high-level server is
`MCPServer`, which 1.x called `FastMCP`). 2.x rather than 1.x because its stdio transport points
fd 1 at stderr (and fd 0 at /dev/null) while it serves, answering on a private copy of the real
stdout, so that nothing a library or a child process prints can corrupt the protocol; and because
it runs a plain `def` tool on a worker thread, so a call that waits seconds for an LLM does not
stop the server answering others. 1.x ran such tools on the event loop and wrote to stdout in place.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import sys
import threading
from typing import Annotated, Any, Callable, Literal

import anyio
from pydantic import BaseModel, Field, ValidationError

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from memvault import __version__
from memvault.store import files, signals
from memvault.errors import MemvaultError, as_memvault_error, validation_problem

Kind = Literal["fact", "note", "decision"]
SearchKind = Literal["fact", "note", "decision", "turn", "episode"]
# What recent_memories lists when no kind is asked for: what a user or an agent stored, not chat turns.
RECENT_KINDS = ("fact", "note", "decision")
# memory_history lists at most this many changes of one commit: an import commits thousands at once.
MAX_HISTORY_CHANGES = 100

INSTRUCTIONS = (
    "memvault is the user's long-term memory: markdown files in a git repository that the user owns. "
    "Call search_memory before answering anything that may depend on what you were told earlier "
    "(preferences, people, projects, decisions). Store lasting facts, notes and decisions with add_memory, "
    "one idea per memory, in plain sentences; pass extract=true to let memvault pick out the facts of a "
    "longer text and retire the memories they contradict. Memories are never erased: delete_memory and "
    "replacements move them aside, and memory_history shows what changed."
)

ConversationArg = Annotated[str | None, Field(
    description="A conversation (project, topic) id, such as 'work'. Memories without one live in 'global'.")]


# -- results -------------------------------------------------------------------------------------

class MemoryItem(BaseModel):
    id: str = Field(description="The memory's id (a unique prefix of 4 or more characters also works).")
    kind: str = Field(description="fact, note, decision, or turn (a chat message).")
    conversation: str
    created_at: str = Field(description="ISO 8601, UTC.")
    text: str
    tags: list[str] = Field(default_factory=list)


class SearchHit(MemoryItem):
    date: str = Field(description="The day it was said or written, in words ('Tue 6 June 2023'; UTC).")
    times: dict[str, str] | None = Field(None, description="The relative times in its text and the days they name, "
                                         "counted from its date: {'yesterday': 'Mon 5 June 2023'}.")
    score: float = Field(description="0 to 1; higher is more relevant (relevance, then a little recency).")
    earlier: str | None = Field(None, description="Set when something newer took this memory's place: since when, "
                                "and what ('earlier; since Sun 3 May 2026: Lena lives in Lisbon'). Prefer the "
                                "newer one.")


class SearchResults(BaseModel):
    results: list[SearchHit] = Field(description="Best first.")


class MemoryDetail(MemoryItem):
    deleted: bool = Field(description="True for a memory that was deleted or replaced (it is kept aside).")
    deleted_reason: str | None = Field(None, description="user, contradiction, update or evicted.")
    replaced_by: str | None = Field(None, description="The id of the memory that replaced this one.")
    path: str = Field(description="The file, relative to the vault.")
    front_matter: dict[str, Any] = Field(description="Every key of the file's YAML front matter.")


class Change(BaseModel):
    event: Literal["ADD", "UPDATE", "REPLACE", "DELETE", "EVICT", "WITHHELD"] = Field(
        description="ADD: stored. UPDATE: stored, refining the memory `replaces`. REPLACE: this older memory "
                    "was made untrue by `replaced_by` and set aside. DELETE, EVICT: set aside. WITHHELD: not "
                    "learned, because it held a secret (no id; its text has a placeholder instead).")
    id: str | None
    kind: str
    conversation: str
    text: str
    replaces: str | None = None
    old_text: str | None = None
    replaced_by: str | None = None
    new_text: str | None = None
    reason: str | None = None
    would_replace: list[str] | None = Field(None, description="ADD of a proposal: the facts the user added it "
                                                               "would retire; they stay until the user keeps it.")


class AddResult(BaseModel):
    changes: list[Change]
    note: str | None = Field(None, description="Why nothing changed, when nothing did.")


class ReviewFact(BaseModel):
    id: str
    text: str


class ReviewEntry(BaseModel):
    id: str
    status: Literal["pending", "proposal", "learned"] = Field(
        description="pending: waits, unused, until the user keeps it (setting learned_review); proposal: live, "
                    "and would retire facts the user added, which stay until it is kept; learned: live.")
    conversation: str
    created_at: str
    text: str
    said: str | None = Field(None, description="The user's words it was learned from.")
    would_replace: list[ReviewFact] = Field(description="Facts the user added that it would retire once kept.")
    replaced: list[ReviewFact] = Field(description="Learned facts it retired (rejecting it brings them back).")


class ReviewList(BaseModel):
    facts: list[ReviewEntry] = Field(description="Newest first. `memvault review` keeps or rejects them.")


class RecentMemories(BaseModel):
    memories: list[MemoryItem] = Field(description="Newest first.")
    next_cursor: str | None = Field(None, description="Pass as cursor for the older ones; none: there are no more.")


class HistoryChange(BaseModel):
    id: str
    action: str = Field(description="added, edited, deleted, replaced, evicted, restored, removed, purged, or "
                                    "resolved (a sync settled a conflict over it: `cause` says how).")
    text: str
    path: str
    reason: str | None = None
    replaced_by: str | None = None
    replaces: str | None = None
    note: str | None = Field(None, description="The reason given for a deletion.")
    cause: str | None = Field(None, description="What replaced, deleted or resolved it: a message, a command.")


class HistoryEntry(BaseModel):
    commit: str
    date: str
    command: str = Field(description="The memvault command that made the commit, or 'hand edit'.")
    subject: str
    changes: list[HistoryChange] = Field(description=f"At most {MAX_HISTORY_CHANGES} per commit.")
    changes_total: int = Field(description="How many memories the commit changed (an import: thousands).")


class History(BaseModel):
    entries: list[HistoryEntry] = Field(description="Newest first.")


class IndexState(BaseModel):
    rows: int = Field(description="Memories the search index holds.")
    in_step: bool = Field(description="Whether the index holds exactly the files (what `memvault reindex --check` "
                                      "answers; a search brings hand edits in).")
    out_of_step: str = Field(description="What differs, in words (empty when in step).")


class VaultStats(BaseModel):
    memories: int = Field(description="Live memories (files the index leaves out not counted).")
    by_kind: dict[str, int]
    deleted: int
    skipped: int = Field(description="Files left out: unreadable, or claiming an id another file has.")
    conversations: dict[str, int] = Field(description="Live memories per conversation.")
    index: IndexState
    last_commit: dict[str, str] | None = None


class ConversationSummary(BaseModel):
    conversation: str
    summary: str | None = Field(description="The rolling summary; null when the conversation has none yet.")
    updated_at: str | None = None


# -- the server ----------------------------------------------------------------------------------

class _Server(MCPServer):
    """MCPServer that says in one sentence what is wrong with a call's arguments, and refuses
    arguments a tool does not take (the SDK drops them, so a misspelt `k` would go unnoticed)."""

    def __init__(self, *args: Any, warm_up: Callable[[], None] | None = None,
                 after_warm_up: Callable[[], None] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.parameters: dict[str, list[str]] = {}
        self._warm_up = warm_up
        self._after_warm_up = after_warm_up  # in the warm-up thread, once calls are let through
        self._ready = threading.Event()  # set once the warm-up is over (or failed)
        self._started = threading.Lock()
        if warm_up is None:
            self._ready.set()

    def tool_of(self, fn, **options: Any) -> None:
        # The docstring without its source indentation (the SDK would send it as it is).
        options.setdefault("description", inspect.cleandoc(fn.__doc__ or "") or None)
        self.add_tool(fn, **options)
        self.parameters[fn.__name__] = list(inspect.signature(fn).parameters)

    def start_warm_up(self) -> None:
        """Load the models in a thread, once. Not before the client has its answer to `initialize`:
        both are mostly imports, which take turns on one interpreter lock."""
        if self._warm_up is None or not self._started.acquire(blocking=False):
            return

        def run() -> None:
            try:
                self._warm_up()
            finally:
                self._ready.set()
            if self._after_warm_up is not None:
                self._after_warm_up()

        threading.Thread(target=run, name="memvault-warm-up", daemon=True).start()

    async def list_tools(self):
        self.start_warm_up()  # a client lists the tools right after the handshake
        return await super().list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        known = self.parameters.get(name)
        unknown = sorted(set(arguments or {}) - set(known)) if known is not None else []
        if unknown:
            raise ToolError(f"Error executing tool {name}: unknown argument {', '.join(map(repr, unknown))} "
                            f"({name} takes {', '.join(known)})")
        if not self._ready.is_set():
            # Two threads importing numpy, lancedb and onnxruntime at once can leave a module half
            # initialised for good (seen here: numpy's "partially initialized module"): a call waits
            # for the warm-up thread to have imported them.
            self.start_warm_up()
            await anyio.to_thread.run_sync(self._ready.wait)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"Error executing tool {name}: {validation_problem(exc.__cause__)}") \
                    from exc.__cause__
            raise


def _failure(exc: BaseException) -> ToolError:
    """A library failure as the one line the model reads (LanceDB's and git's in the CLI's words)."""
    failure = as_memvault_error(exc)
    if failure is not None:
        return ToolError(str(failure))
    where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""  # an OSError: the system said no
    return ToolError(f"{where}{getattr(exc, 'strerror', None) or exc}")


def _item(memory) -> dict[str, Any]:
    return {"id": memory.id, "kind": memory.kind, "conversation": memory.conversation_id,
            "created_at": files.format_time(memory.created_at), "text": memory.text, "tags": memory.tags}


def _detail(vault, memory) -> MemoryDetail:
    front_matter = json.loads(json.dumps(memory.front_matter(), default=str))  # YAML dates and the like as text
    return MemoryDetail(**_item(memory), deleted=memory.is_deleted,
                        deleted_reason=memory.extra.get("deleted_reason"),
                        replaced_by=memory.extra.get("replaced_by"),
                        path=vault.relative(memory.path), front_matter=front_matter)


def _change(row: dict[str, Any]) -> Change:
    return Change(event=row["event"], id=row["id"], kind=files.kind_of_role(row["role"]),
                  conversation=row["conversation_id"], text=row["text"], replaces=row.get("replaces"),
                  old_text=row.get("old_text"), replaced_by=row.get("replaced_by"), new_text=row.get("new_text"),
                  reason=row.get("reason"), would_replace=row.get("would_replace"))


def _tags(meta: dict[str, Any]) -> list[str]:
    tags = meta.get("tags") or []
    return [str(t) for t in tags] if isinstance(tags, list) else [str(tags)]


def build_server(vault, warm_up: bool = False) -> MCPServer:
    """The MCP server of one open vault (a `Memvault`, ideally opened with watch=True). warm_up: load
    the models in a thread once the client has listed the tools (or made a first call, which waits
    for them), so that the first search does not pay for them."""
    started = files.utcnow()
    server = _Server("memvault", title="memvault", version=__version__, instructions=INSTRUCTIONS,
                     log_level="WARNING", warm_up=(lambda: _warm(vault)) if warm_up else None,
                     after_warm_up=(lambda: _catch_up(vault, started)) if warm_up else None)
    read_only = dict(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    def search_memory(
        query: Annotated[str, Field(description="What to look for, in words: a question or a few keywords.")],
        top_k: Annotated[int, Field(ge=1, le=50, description="How many memories to return.")] = 5,
        conversation: Annotated[str | None, Field(
            description="Search this conversation plus 'global'; leave out to search every conversation.")] = None,
        kind: Annotated[SearchKind | None, Field(description="Only memories of this kind.")] = None,
        since: Annotated[str | None, Field(
            description="Only memories created at or after this ISO 8601 date or time, e.g. 2026-01-31.")] = None,
        until: Annotated[str | None, Field(
            description="Only memories created at or before this ISO 8601 date or time.")] = None,
        as_of: Annotated[str | None, Field(
            description="Search what the memory held at this ISO 8601 date or time: memories created later left "
                        "out, those deleted or replaced since included as they were.")] = None,
    ) -> SearchResults:
        """Search the user's long-term memory: semantic and keyword matching, the most relevant and recent
        first, near-duplicates left out. Returns each memory's id, text, kind, conversation, created_at (and
        date, in words; times: the days its relative times name), score and tags."""
        try:
            outcome = vault.search(query, top_k=top_k, conversation=conversation or files.DEFAULT_CONVERSATION,
                                   all_conversations=conversation is None, kinds=[kind] if kind else None,
                                   since=since, until=until, as_of=as_of)
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        return SearchResults(results=[
            SearchHit(id=r.id, kind=files.kind_of_role(r.role), conversation=r.conversation_id,
                      created_at=r.created_at, date=r.day, times=r.times() or None, text=r.text, tags=_tags(r.meta),
                      score=round(r.score, 4), earlier=(r.superseded or {}).get("note"))
            for r in outcome.results])

    def add_memory(
        text: Annotated[str, Field(description="The memory, in plain sentences (one idea per memory is best).")],
        conversation: ConversationArg = None,
        kind: Annotated[Kind, Field(description="fact (about the user or the world), note (something to keep, "
                                                "with its source) or decision (what was decided).")] = "fact",
        tags: Annotated[list[str], Field(description="Labels to filter by later.")] = [],  # noqa: B006 (pydantic copies it)
        extract: Annotated[bool, Field(
            description="Let memvault's LLM pick out the facts of the text and retire the memories they "
                        "contradict, instead of storing the text as it is (kind fact, no tags).")] = False,
    ) -> AddResult:
        """Store a memory in the user's long-term memory: a markdown file, committed to git. Returns what was
        stored and, with extract, what was updated or replaced (older memories are set aside, never erased)."""
        try:
            if extract:
                vault.check_extract(kind, tags=tags)
                learned = vault.add_extracted(text, conversation=conversation or files.DEFAULT_CONVERSATION)
                changes = [_change(row) for row in learned.to_json()]
                return AddResult(changes=changes, note=None if changes else "no facts found in the text")
            memories = vault.add(text, conversation=conversation or files.DEFAULT_CONVERSATION, kind=kind,
                                 tags=tags)
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        note = None
        if not memories and memories.duplicates:
            held = memories.duplicates[0][1]
            note = (f"nothing stored: memory {held.id} ({held.kind}, conversation {held.conversation_id}) "
                    "already says exactly this")
        return AddResult(changes=[Change(event="ADD", **_item(m)) for m in memories], note=note)

    def get_memory(
        id: Annotated[str, Field(description="The memory's id, or a unique prefix of at least 4 characters.")],
        as_of: Annotated[str | None, Field(
            description="The memory as it was at this ISO 8601 date or time (an error if it did not exist then).")
        ] = None,
    ) -> MemoryDetail:
        """One memory with its whole front matter; deleted and replaced ones too (then `deleted` is true and
        `replaced_by` names the memory that replaced it)."""
        try:
            return _detail(vault, vault.get(id, as_of=as_of))
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None

    def delete_memory(
        id: Annotated[str, Field(description="The memory's id, or a unique prefix of at least 4 characters.")],
        reason: Annotated[str | None, Field(description="Why, in a few words; kept with the deleted memory.")] = None,
    ) -> MemoryDetail:
        """Delete a memory: it leaves search and is moved aside (under deleted/, with the reason), in one git
        commit, so it can still be read with get_memory and restored. Returns the deleted memory."""
        try:
            removed = vault.remove([id], reason=reason)
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        return _detail(vault, removed[0])

    def recent_memories(
        conversation: Annotated[str | None, Field(
            description="Only this conversation; leave out for every conversation.")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="How many memories to return.")] = 10,
        kind: Annotated[SearchKind | None, Field(
            description="Only this kind; leave out for facts, notes and decisions.")] = None,
        as_of: Annotated[str | None, Field(
            description="The newest the memory held at this ISO 8601 date or time (deleted since: as they were).")
        ] = None,
        cursor: Annotated[str | None, Field(
            description="The next_cursor of the call before (with the same other arguments): the memories after "
                        "those it returned.")] = None,
    ) -> RecentMemories:
        """The newest memories, newest first (deleted ones left out; with as_of, those held then)."""
        try:
            page = vault.recent(conversation, limit=limit, kinds=[kind] if kind else RECENT_KINDS, as_of=as_of,
                                cursor=cursor)
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        return RecentMemories(memories=[MemoryItem(**_item(m)) for m in page], next_cursor=page.next_cursor)

    def memory_history(
        id: Annotated[str | None, Field(
            description="Only the story of this memory (id or unique prefix), through its replacements; "
                        "leave out for every change.")] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="How many commits to return.")] = 20,
    ) -> History:
        """What changed in the memory and when, newest first, read from git (what `memvault log` shows):
        each commit with the memories it added, edited, replaced or deleted."""
        try:
            # git history may hold a secret from before it was withheld; the agent's model sees its placeholder
            entries = vault.log_for_model(id, limit=limit, max_changes=MAX_HISTORY_CHANGES)
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        return History(entries=[HistoryEntry(**entry) for entry in entries])

    def vault_stats() -> VaultStats:
        """The vault in numbers (what `memvault stats` shows): memories by kind and conversation, the
        deleted ones, files left out, the last commit, and whether the search index is in step with
        the files."""
        try:
            data = vault.stats()
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        index = data["index"]
        return VaultStats(memories=data["memories"], by_kind=data["by_kind"], deleted=data["deleted"],
                          skipped=data["skipped"], conversations=data["conversations"],
                          index=IndexState(rows=index["rows"], in_step=index["in_step"],
                                           out_of_step=index["out_of_step"]),
                          last_commit=data["last_commit"])
    def review_memories(
        conversation: Annotated[str | None, Field(
            description="Only this conversation; leave out for every conversation.")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="How many to return.")] = 20,
    ) -> ReviewList:
        """What memvault learned that the user has not reviewed yet, newest first: each fact with the words
        it came from, and the user's facts it would replace. Keeping or rejecting them is the user's call
        (`memvault review`)."""
        try:
            items = vault.review(conversation, limit=limit)
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        return ReviewList(facts=[ReviewEntry(
            id=i.memory.id, status=i.status, conversation=i.memory.conversation_id,
            created_at=files.format_time(i.memory.created_at), text=i.memory.text, said=i.said,
            would_replace=[ReviewFact(id=m.id, text=m.text) for m in i.would_replace],
            replaced=[ReviewFact(id=m.id, text=m.text) for m in i.replaced]) for i in items])

    def conversation_summary(
        conversation: Annotated[str, Field(description="The conversation id, such as 'global' or 'work'.")],
    ) -> ConversationSummary:
        """The rolling summary memvault keeps of a conversation, if it has one yet."""
        try:
            summary = vault.summary(conversation)
        except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line: _failure)
            raise _failure(exc) from None
        if summary is None:
            return ConversationSummary(conversation=conversation, summary=None)
        updated = summary.extra.get("updated_at") or files.format_time(summary.created_at)
        return ConversationSummary(conversation=conversation, summary=summary.text, updated_at=str(updated))

    server.tool_of(search_memory, title="Search memory", annotations=ToolAnnotations(title="Search memory", **read_only))
    server.tool_of(add_memory, title="Add a memory", annotations=ToolAnnotations(
        title="Add a memory", read_only_hint=False, destructive_hint=True,  # extract may replace memories
        idempotent_hint=False, open_world_hint=True))  # extract sends the text to the configured LLM
    server.tool_of(get_memory, title="Get a memory", annotations=ToolAnnotations(title="Get a memory", **read_only))
    server.tool_of(delete_memory, title="Delete a memory", annotations=ToolAnnotations(
        title="Delete a memory", read_only_hint=False, destructive_hint=True, idempotent_hint=False,
        open_world_hint=False))
    server.tool_of(recent_memories, title="Recent memories",
                   annotations=ToolAnnotations(title="Recent memories", **read_only))
    server.tool_of(memory_history, title="Memory history",
                   annotations=ToolAnnotations(title="Memory history", **read_only))
    server.tool_of(vault_stats, title="Vault stats", annotations=ToolAnnotations(title="Vault stats", **read_only))
    server.tool_of(conversation_summary, title="Conversation summary",
                   annotations=ToolAnnotations(title="Conversation summary", **read_only))
    server.tool_of(review_memories, title="Learned facts to review",
                   annotations=ToolAnnotations(title="Learned facts to review", **read_only))
    return server


def run_stdio(vault) -> None:
    """Serve the vault over stdin/stdout until the client closes stdin or a stop signal comes; the
    models load in a thread once the client has listed the tools."""
    signals.stop_on_signals(lambda signum, _frame: _leave(vault, signum))
    if signals.requested.is_set():  # a signal while it started
        _leave(vault, signal.SIGTERM)
    build_server(vault, warm_up=True).run("stdio")


# At most this long for a change of this process under way when a stop signal comes (they take a moment).
STOP_GRACE = 30.0
_leaving = False


def _leave(vault, signum: int) -> None:
    """A stop signal while serving (docs/design.md, "Stopping a long-running command"): the process
    leaves with exit code 0 once no call of its is half way through a change: it takes the vault lock
    (a call's change holds it) and keeps it until the process is gone. The event loop cannot be
    stopped instead: the SDK reads stdin on a thread that waits until the client writes or leaves.
    A second signal: at once."""
    global _leaving
    if _leaving:
        signals.end_now(signum)
    _leaving = True
    try:
        held = vault.hold_lock(STOP_GRACE, "mcp (stopping)")
        held.__enter__()  # `held` keeps it until os._exit: collected, it would release it
    except (MemvaultError, OSError):
        pass  # another process has held it all this time: no call of ours is in a change
    sys.stderr.flush()
    os._exit(0)
def _catch_up(vault, before) -> None:
    """The learning owed to turns from before this server started (`Memvault.learn`), each change said
    on stderr; a failure is a warning (the turns wait for the next start or `memvault learn`)."""
    from memvault.faces.term import change_lines

    try:
        outcome = vault.learn(before=before)
    except Exception as exc:
        sys.stderr.write(f"memvault: warning: catching up on learning failed: {' '.join(str(exc).split())[:300]}\n")
        return
    for line in change_lines(outcome.learned.to_json()):
        sys.stderr.write(f"memvault: {line}\n")
    if outcome.turns:
        sys.stderr.write(f"memvault mcp: caught up learning from {outcome.done} of {len(outcome.turns)} turn(s) "
                         "never learned from\n")
    if outcome.error:
        sys.stderr.write(f"memvault: warning: {outcome.error}\n")


def _warm(vault) -> None:
    try:
        vault.warm()
    except Exception as exc:  # the first call that needs it says what is wrong, as its error result
        sys.stderr.write(f"memvault: warm-up failed: {' '.join(str(exc).split())[:300]}\n")
