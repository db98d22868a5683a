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
import sys
from typing import Any, Callable, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from memvault import __version__
from memvault.errors import answer_for, for_client, validation_problem
from memvault.faces import shapes
from memvault.faces.lifecycle import LongLived
from memvault.request_options import DELETE, GET, LOG, RECENT, REVIEW, SEARCH, STATS, SUMMARY, ADD, Request
from memvault.store import files

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

# -- results -------------------------------------------------------------------------------------
# Each tool answers with the library's to_json rows, the field names `--json` and serve's REST API give
# (docs/design.md, "The library API and its faces"); these models say the fields an agent reads, with
# what they mean (the output schema), and let every other key of the row through as it is.

class _Row(BaseModel):
    model_config = ConfigDict(extra="allow")


class MemoryRow(_Row):
    """A memory as `memvault show --json` and GET /v1/memories/{id} give it (files.Memory.to_json)."""

    id: str = Field(description="The memory's id (a unique prefix of 4 or more characters also works).")
    path: str | None = Field(None, description="The file, relative to the vault.")
    role: str = Field(description="memory (a fact), note, decision, user or assistant (a chat turn), episode, ...")
    kind: str = Field(description="fact, note, decision, turn (a chat message) or episode.")
    conversation_id: str
    created_at: str = Field(description="ISO 8601, UTC.")
    text: str
    meta: dict[str, Any] = Field(default_factory=dict, description="The file's other front matter: tags, source, "
                                 "deleted_reason, replaced_by, ...")
    deleted: bool = Field(False, description="True for a memory that was deleted or replaced (it is kept aside).")
    # With as_of, a memory edited after that moment also has `edited_since` (when) and `text_of` ("then": its
    # text as it was; "now": today's, the version of then not in the history). Not declared here: a declared
    # field would be in every row, null, where show --json has no such key.


class SearchRow(_Row):
    """A search result as `memvault search --json` and POST /v1/memories/search give it."""

    id: str
    role: str
    conversation_id: str
    created_at: str = Field(description="ISO 8601, UTC.")
    date: str = Field(description="The day it was said or written, in words ('Tue 6 June 2023'; UTC).")
    times: dict[str, str] = Field(default_factory=dict, description="The relative times in its text and the days "
                                  "they name, counted from its date: {'yesterday': 'Mon 5 June 2023'}.")
    text: str
    score: float = Field(description="0 to 1; higher is more relevant (relevance, then a little recency).")
    meta: dict[str, Any] = Field(default_factory=dict, description="tags, source, ...")
    superseded: dict[str, Any] | None = Field(None, description="Set when something newer took this memory's "
                                              "place: `note` says since when, and what ('earlier; since Sun 3 May 2026: Lena "
                                              "lives in Lisbon'). Prefer the newer one.")


class SearchResults(BaseModel):
    results: list[SearchRow] = Field(description="Best first.")


class ChangeRow(_Row):
    """One change, as `add --extract --json` prints it (vault.Event.to_json)."""

    event: Literal["ADD", "UPDATE", "REPLACE", "DELETE", "EVICT", "WITHHELD"] = Field(
        description="ADD: stored. UPDATE: stored, refining the memory `replaces`. REPLACE: this older memory "
                    "was made untrue by `replaced_by` and set aside. DELETE, EVICT: set aside. WITHHELD: not "
                    "learned, because it held a secret (no id; its text has a placeholder instead).")
    id: str | None
    role: str
    conversation_id: str
    text: str


class AddResult(BaseModel):
    memories: list[MemoryRow] = Field(default_factory=list, description="What was stored (`stored`: true), and "
                                      "for a text already held the memory that holds it (`stored`: false), as "
                                      "`add --json` prints them.")
    changes: list[ChangeRow] = Field(default_factory=list, description="With extract: every change it made.")
    note: str | None = Field(None, description="Why nothing changed, when nothing did.")


class ReviewRow(_Row):
    """A learned fact not reviewed yet, as `memvault review --json` lists it."""

    id: str
    status: Literal["pending", "proposal", "learned"] = Field(
        description="pending: waits, unused, until the user keeps it (setting learned_review); proposal: live, "
                    "and would retire facts the user added, which stay until it is kept; learned: live.")
    conversation_id: str
    text: str
    said: str | None = Field(None, description="The user's words it was learned from.")
    would_replace: list[dict[str, str]] = Field(description="Facts the user added that it would retire once kept.")
    replaced: list[dict[str, str]] = Field(description="Learned facts it retired (rejecting it brings them back).")


class ReviewList(BaseModel):
    facts: list[ReviewRow] = Field(description="Newest first. `memvault review` keeps or rejects them.")


class RecentMemories(BaseModel):
    """As GET /v1/memories gives it."""

    data: list[MemoryRow] = Field(description="Newest first.")
    has_more: bool
    next_cursor: str | None = Field(None, description="Pass as cursor for the older ones; none: there are no more.")


class HistoryChange(_Row):
    id: str
    action: str = Field(description="added, edited, deleted, replaced, evicted, restored, removed, purged, or "
                                    "resolved (a sync settled a conflict over it: `cause` says how).")
    text: str


class HistoryEntry(_Row):
    """A commit as `memvault log --json` prints it."""

    commit: str
    date: str
    command: str = Field(description="The memvault command that made the commit, or 'hand edit'.")
    subject: str
    changes: list[HistoryChange] = Field(description=f"At most {MAX_HISTORY_CHANGES} per commit.")
    changes_total: int = Field(description="How many memories the commit changed (an import: thousands).")


class History(BaseModel):
    entries: list[HistoryEntry] = Field(description="Newest first.")


class VaultStats(_Row):
    """What `memvault stats --json` and GET /v1/stats give."""

    memories: int = Field(description="Live memories (files the index leaves out not counted).")
    by_kind: dict[str, int]
    deleted: int
    skipped: int = Field(description="Files left out: unreadable, or claiming an id another file has.")
    conversations: dict[str, int] = Field(description="Live memories per conversation.")
    index: dict[str, Any] = Field(description="rows, in_step (what `memvault reindex --check` answers), "
                                              "out_of_step (what differs, in words), ...")
    last_commit: dict[str, str] | None = None


class ConversationSummary(BaseModel):
    conversation_id: str
    summary: str | None = Field(description="The rolling summary; null when the conversation has none yet.")
    updated_at: str | None = None


# -- the server ----------------------------------------------------------------------------------

class _Server(MCPServer):
    """MCPServer that says in one sentence what is wrong with a call's arguments, refuses arguments a
    tool does not take (the SDK drops them, so a misspelt `k` would go unnoticed), and holds calls
    until the warm-up (`LongLived`) is done."""

    def __init__(self, *args: Any, life: LongLived | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.parameters: dict[str, list[str]] = {}
        self.life = life
        self.root = None  # the vault's folder: left out of what a client is told (errors.for_client)

    def tool_for(self, request: Request, run: Callable[[dict, dict], Any], render: Callable[[Any, dict], Any],
                 output: type[BaseModel], *, name: str | None = None, own: dict[str, tuple[Any, Any]] | None = None,
                 doc: str, **options: Any) -> None:
        """One tool of a request definition (request_options.py): its parameters are the definition's
        (faces/shapes.py), plus `own`; a call's arguments become the library's (`asked`), `run(asked,
        given)` makes the one library call and `render(result, given)` the tool's answer. Every failure
        reaches the model as the one line every face gives (errors.answer_for), and the server goes on."""
        name = name or request.where["mcp"]
        parameters = shapes.parameters(request, "mcp", own)

        def tool(**given: Any) -> Any:
            try:
                return render(run(request.library_args("mcp", given), given), given)
            except Exception as exc:  # noqa: BLE001 (every failure reaches the model as one line)
                raise _failure(exc, self.root) from None

        tool.__name__ = tool.__qualname__ = name
        tool.__signature__ = inspect.Signature(parameters, return_annotation=output)  # type: ignore[attr-defined]
        tool.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": output}
        # The docstring without its source indentation (the SDK would send it as it is).
        self.add_tool(tool, name=name, description=inspect.cleandoc(doc), **options)
        self.parameters[name] = [p.name for p in parameters]

    def start_warm_up(self) -> None:
        """Load the models in a thread, once. Not before the client has its answer to `initialize`:
        both are mostly imports, which take turns on one interpreter lock."""
        if self.life is not None:
            self.life.warm_up_in_thread(then=self.life.catch_up)

    async def list_tools(self):
        self.start_warm_up()  # a client lists the tools right after the handshake
        return await super().list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        known = self.parameters.get(name)
        unknown = sorted(set(arguments or {}) - set(known)) if known is not None else []
        if unknown:
            takes = f"{name} takes {', '.join(known)}" if known else f"{name} takes no arguments"
            raise ToolError(f"Error executing tool {name}: unknown argument {', '.join(map(repr, unknown))} "
                            f"({takes})")
        if self.life is not None and not self.life.ready.is_set():
            # Two threads importing numpy, lancedb and onnxruntime at once can leave a module half
            # initialised for good (seen here: numpy's "partially initialized module"): a call waits
            # for the warm-up thread to have imported them.
            self.start_warm_up()
            await anyio.to_thread.run_sync(self.life.ready.wait)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"Error executing tool {name}: {validation_problem(exc.__cause__)}") \
                    from exc.__cause__
            raise


def _failure(exc: BaseException, root=None) -> ToolError:
    """A library failure as the one line the model reads (errors.answer_for: the words every face gives),
    without the vault's place on this machine (`root`: the client may run elsewhere)."""
    return ToolError(for_client(answer_for(exc).message, root))


def build_server(vault, warm_up: bool = False, life: LongLived | None = None) -> MCPServer:
    """The MCP server of one open vault (a `Memvault`, ideally opened with watch=True). warm_up: load
    the models in a thread once the client has listed the tools (or made a first call, which waits
    for them), so that the first search does not pay for them, then catch up on learning (`life`, a
    LongLived: made here when not given)."""
    if warm_up and life is None:
        life = LongLived(vault, "mcp", lambda line: sys.stderr.write(line + "\n"))
    server = _Server("memvault", title="memvault", version=__version__, instructions=INSTRUCTIONS,
                     log_level="WARNING", life=life if warm_up else None)
    server.root = vault.root
    read_only = dict(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    def tool(request: Request, run, render, output, title: str, hints: dict | None = None, **more):
        # The description is run's docstring: what the model reads about the tool.
        server.tool_for(request, run, render, output, title=title, doc=run.__doc__,
                        annotations=ToolAnnotations(title=title, **(hints or read_only)), **more)

    def search(asked: dict, given: dict):
        """Search the user's long-term memory: semantic and keyword matching, the most relevant and recent
        first, near-duplicates left out. Returns each memory's id, text, role, conversation_id, created_at
        (and date, in words; times: the days its relative times name), score, meta (tags, ...) and, for one
        something newer replaced, `superseded`."""
        asked.setdefault("all_conversations", "conversation" not in asked)  # none named: every conversation
        return vault.search(**asked)

    tool(SEARCH, search, lambda outcome, _: SearchResults(results=outcome.to_json()), SearchResults, "Search memory")

    def add(asked: dict, given: dict):
        """Store a memory in the user's long-term memory: a markdown file, committed to git. Returns what was
        stored and, with extract, what was updated or replaced (older memories are set aside, never erased)."""
        return vault.add(**asked)

    def added(result, given: dict) -> AddResult:
        if result.learned is not None:  # extract
            changes = result.learned.to_json()
            return AddResult(changes=changes, note=None if changes else "no facts found in the text")
        note = None
        if not result and result.duplicates:
            held = result.duplicates[0][1]
            note = (f"nothing stored: memory {held.id} ({held.kind}, conversation {held.conversation_id}) "
                    "already says exactly this")
        return AddResult(memories=result.to_json(vault.root), note=note)

    tool(ADD, add, added, AddResult, "Add a memory",
         hints=dict(read_only_hint=False, destructive_hint=True,  # extract may replace memories
                    idempotent_hint=False, open_world_hint=True))  # extract sends the text to the configured LLM

    def get(asked: dict, given: dict):
        """One memory with its whole front matter, as `show --json` gives it; deleted and replaced ones too
        (then `deleted` is true and meta's `replaced_by` names the memory that replaced it)."""
        return vault.get(**asked)

    tool(GET, get, lambda memory, _: memory.to_json(vault.root), MemoryRow, "Get a memory")

    def delete(asked: dict, given: dict):
        """Delete a memory: it leaves search and is moved aside (under deleted/, with the reason), in one git
        commit, so it can still be read with get_memory and restored. Returns the deleted memory."""
        return vault.remove(**asked)

    tool(DELETE, delete, lambda removed, _: removed[0].to_json(vault.root), MemoryRow, "Delete a memory",
         hints=dict(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False))

    def recent(asked: dict, given: dict):
        """The newest memories, newest first (deleted ones left out; with as_of, those held then), a page at
        a time: pass next_cursor as cursor for the older ones."""
        asked.setdefault("kinds", list(RECENT_KINDS))  # what a user or an agent stored, not chat turns
        return vault.recent(**asked)

    tool(RECENT, recent, lambda page, _: RecentMemories(data=[m.to_json(vault.root) for m in page],
                                                        has_more=page.next_cursor is not None,
                                                        next_cursor=page.next_cursor), RecentMemories,
         "Recent memories")

    def history(asked: dict, given: dict):
        """What changed in the memory and when, newest first, read from git (what `memvault log` shows):
        each commit with the memories it added, edited, replaced or deleted."""
        # git history may hold a secret from before it was withheld; the agent's model sees its placeholder
        return vault.log_for_model(**asked, max_changes=MAX_HISTORY_CHANGES)

    tool(LOG, history, lambda entries, _: History(entries=entries), History, "Memory history")

    def stats(asked: dict, given: dict):
        """The vault in numbers (what `memvault stats` shows): memories by kind and conversation, the
        deleted ones, files left out, the last commit, and whether the search index is in step with
        the files."""
        return vault.stats(**asked)

    tool(STATS, stats, lambda result, _: result.to_json(), VaultStats, "Vault stats")

    def summary(asked: dict, given: dict):
        """The rolling summary memvault keeps of a conversation, if it has one yet."""
        return vault.summary(**asked)

    tool(SUMMARY, summary, _summary, ConversationSummary, "Conversation summary")

    def review(asked: dict, given: dict):
        """What memvault learned that the user has not reviewed yet, newest first: each fact with the words
        it came from, and the user's facts it would replace. Keeping or rejecting them is the user's call
        (`memvault review`)."""
        return vault.review(**asked)

    tool(REVIEW, review, lambda items, _: ReviewList(facts=[item.to_json(vault.root) for item in items]), ReviewList,
         "Learned facts to review")
    return server


def _summary(summary, given: dict) -> ConversationSummary:
    conversation = given["conversation"]
    if summary is None:
        return ConversationSummary(conversation_id=conversation, summary=None)
    updated = summary.extra.get("updated_at") or files.format_time(summary.created_at)
    return ConversationSummary(conversation_id=conversation, summary=summary.text, updated_at=str(updated))


def run_stdio(life: LongLived) -> None:
    """Serve the vault over stdin/stdout until the client closes stdin or a stop signal comes (then
    `life.leave_on_signal`: docs/design.md, "Stopping a long-running command"); the models load in a
    thread once the client has listed the tools, then the learning owed is caught up."""
    life.leave_on_signals()
    build_server(life.vault, warm_up=True, life=life).run("stdio")
