"""One definition per request: the options of each library call the faces offer (search, add, recent,
log, review, get, delete, chat...), written once: name, type, bounds, default, help words, and per face
the name it gives an option where that differs, what it leaves out and why (docs/design.md, "The
library API and its faces").

The faces are built from these at import: the CLI's typer options (faces/cli_options.py), serve's
request bodies and the MCP tools' input schemas (faces/shapes.py, pydantic). An option added here
reaches every face, or is left out of one by name with a reason; tests/test_requests.py holds each
definition to its library call's signature and each face to its definition.

The standard library only: `import memvault` and `memvault --help` load this, and pay for nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

FACES = ("cli", "serve", "mcp", "page")  # page: the browser's (faces/routes_page.py)

# The kinds of memory a user stores, and those a search or a listing may ask for (files.SEARCH_KINDS
# maps each to its roles): the one list every face offers.
KINDS = ("fact", "note", "decision")
SEARCH_KINDS = KINDS + ("turn", "episode")
RETRIEVERS = ("hybrid", "dense", "bm25")


@dataclass(frozen=True)
class Option:
    """One parameter of a library call, as every face offers it.

    type: str, int, float or bool (a time is a str: ISO 8601); many: a list of them (a CLI option
    given once per value); choices: the values it may take. default: the library's (None: not
    given, the library decides, often from `setting`). ge, le: bounds. required: no default.

    For the CLI: flags (default `--name-with-dashes`), metavar, argument (positional), complete (the
    completion: conversation, memory, live_memory), negate (a flag that sets the option False:
    `--no-rerank`).

    faces: per face, either a string (the face leaves the option out: why), or a mapping of what
    differs there (name, help, many, default, le, ...). Differences are the exception, each one
    said where it is made."""

    name: str
    type: type = str
    help: str = ""
    default: Any = None
    many: bool = False
    choices: tuple[str, ...] = ()
    ge: float | None = None
    le: float | None = None
    required: bool = False
    setting: str | None = None
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    argument: bool = False
    complete: str | None = None
    negate: str | None = None
    faces: Mapping[str, Any] = field(default_factory=dict)

    def at(self, face: str) -> "Option | None":
        """The option as `face` offers it (its differences applied), or None when it leaves it out."""
        differs = self.faces.get(face)
        if isinstance(differs, str):
            return None
        return replace(self, faces={}, **differs) if differs else self

    def left_out(self, face: str) -> str | None:
        differs = self.faces.get(face)
        return differs if isinstance(differs, str) else None


def library_only(why: str) -> dict[str, str]:
    """faces= for an option no face offers (a callback, a Python object)."""
    return {face: why for face in FACES}


@dataclass(frozen=True)
class Request:
    """A library call as the faces offer it: `call` the Memvault method, `options` its parameters (in
    its order and names), `where` each face's command, route or tool (a face without an entry does not
    offer it), `own` what only a face has (its output format, a context): not the library's."""

    call: str
    options: tuple[Option, ...]
    where: Mapping[str, str]
    own: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def option(self, name: str) -> Option:
        return next(o for o in self.options if o.name == name)

    def at(self, face: str) -> list[tuple[Option, Option]]:
        """(the library's option, the face's form of it) for every option the face offers."""
        return [(o, o.at(face)) for o in self.options if o.at(face) is not None]

    def expected(self, face: str) -> set[str]:
        """The parameter names the face takes: every option it offers, in its names, and its own."""
        return {mine.name for _, mine in self.at(face)} | set(self.own.get(face, ()))

    def library_args(self, face: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """The face's values (by its names) as the library call's keyword arguments: a value not given
        (None, an empty list) left out, so that the library's default applies; a negated flag turned
        round; one value where the library takes a list, as a list; a choice (an Enum) by its value."""
        args: dict[str, Any] = {}
        for option, mine in self.at(face):
            if mine.name not in given:
                continue
            value = given[mine.name]
            if value is None or (mine.many and not value and not isinstance(value, str)):
                continue
            value = getattr(value, "value", value)
            if mine.many:
                value = [getattr(v, "value", v) for v in value]
            if mine.negate and mine.type is bool:
                value = not value
            if option.many and not mine.many:
                value = [value]
            args[option.name] = value
        return args

    def with_option(self, option: Option) -> "Request":
        """This request with one more option (what a new library parameter does; tests)."""
        return replace(self, options=self.options + (option,))


# -- the words shared by several requests -------------------------------------------------------------

ISO = "ISO"
_TUNING = "tuning for scripts and experiments; an agent gets the settings' values"
_CALLBACK = library_only("a Python callback")


def _conversation(help_: str, default: str | None = None, **faces: Any) -> Option:
    """A conversation option: serve calls it conversation_id, and fills in its own (`serve -c`) when a
    request names none."""
    return Option("conversation", help=help_, default=default, flags=("-c", "--conversation"),
                  complete="conversation", faces={"serve": {"name": "conversation_id", "default": None}, **faces})


def _since(what: str = "memories created") -> Option:
    return Option("since", help=f"Only {what} at or after this ISO 8601 date or time.", metavar=ISO)


def _until(what: str = "memories created") -> Option:
    return Option("until", help=f"Only {what} at or before this ISO 8601 date or time.", metavar=ISO)


def _kinds(help_: str, **faces: Any) -> Option:
    return Option("kinds", many=True, choices=SEARCH_KINDS, help=help_,
                  faces={"cli": {"name": "kind", "flags": ("--kind",)}, **faces})


def _tags(help_: str, **faces: Any) -> Option:
    return Option("tags", many=True, help=help_, faces={"cli": {"name": "tag", "flags": ("--tag", "-t")}, **faces})


def _as_of(help_: str, **faces: Any) -> Option:
    return Option("as_of", help=help_, metavar=ISO, faces=faces)


MEMORY_ID_HELP = "The memory's id, or a unique prefix of at least 4 characters."


def _memory_id(help_: str = MEMORY_ID_HELP, **faces: Any) -> Option:
    return Option("id_or_prefix", help=help_, required=True, argument=True, metavar="ID", complete="memory",
                  faces={"cli": {"name": "memory_id"}, "serve": {"name": "memory_id"}, "mcp": {"name": "id"},
                         "page": {"name": "memory_id"}, **faces})


NOW_HELP = ("The clock for recency and for the times the query names (\"last week\"), ISO 8601: for scripts "
            "and tests.")


# -- the requests -------------------------------------------------------------------------------------

SEARCH = Request(
    call="search",
    options=(
        Option("query", help="What to look for, in words: a question or a few keywords.", required=True,
               argument=True, faces={"cli": {"required": False}, "page": {"required": False}}),
        Option("top_k", int, "How many results (default: the default_top_k setting).", ge=1,
               setting="default_top_k", flags=("-k", "--top-k"), faces={"serve": {"le": 1000}, "mcp": {"le": 50}}),
        _conversation("The conversation to search, plus global (default: global; not with all_conversations).",
                      mcp={"help": "Search this conversation plus 'global'; leave out to search every conversation."}),
        Option("all_conversations", bool, "Search every conversation.", default=False,
               flags=("--all-conversations", "-a"),
               faces={"mcp": "a search without a conversation searches every conversation"}),
        _kinds("Only these kinds: fact, note, decision, turn, episode.",
               mcp={"name": "kind", "many": False, "help": "Only memories of this kind."}),
        _tags("Only memories with these tags.", mcp="an agent searches by words"),
        _since(), _until(),
        Option("now", help=NOW_HELP, metavar=ISO, faces={"mcp": "an agent's clock is the real one"}),
        Option("rerank", bool, "Use the cross-encoder where one is available.", default=True,
               negate="Skip the cross-encoder.", faces={"cli": {"name": "no_rerank", "flags": ("--no-rerank",)},
                                                         "mcp": _TUNING}),
        Option("recency_weight", float, "Weight of recency in the score (default: the recency_weight setting).",
               ge=0, le=1, setting="recency_weight", faces={"mcp": _TUNING}),
        Option("mmr_lambda", float, "MMR trade-off; 1.0 = no diversity (default: the mmr_lambda setting).",
               ge=0, le=1, setting="mmr_lambda", faces={"mcp": _TUNING}),
        Option("threshold", float, "Drop results whose relevance is below this (with a reranker: its probability).",
               ge=0, le=1, faces={"mcp": _TUNING}),
        Option("retriever", str, "Candidates from hybrid, dense or bm25.", default="hybrid", choices=RETRIEVERS,
               faces={"mcp": _TUNING}),
        Option("relevance_floor", float, "Without a reranker: leave out memories whose match is below this; 0 keeps "
               "all (default: the relevance_floor setting).", ge=0, le=1, setting="relevance_floor",
               faces={"mcp": _TUNING}),
        Option("session_weight", float, "How much the memories of a result's session lift it; 0 = off (default: "
               "the session_weight setting).", ge=0, le=1, setting="session_weight", faces={"mcp": _TUNING}),
        _as_of("Search what the vault held at this ISO 8601 date or time: memories created later left out, those "
               "deleted or replaced since included as they were."),
    ),
    where={"cli": "memvault search", "serve": "POST /v1/memories/search", "mcp": "search_memory",
           "page": "GET /search"},
    own={"cli": ("ctx", "explain", "output_format", "queries", "json_output"), "page": ("explain",)},
)

ADD = Request(
    call="add",
    options=(
        Option("text", help="The memory, in plain sentences (one idea per memory is best).", required=True,
               faces={"cli": "TEXT, --file or stdin, read by the CLI (a list of words joined)"}),
        _conversation("Conversation id.", "global",
                      mcp={"default": None, "help": "A conversation (project, topic) id, such as 'work'. Memories "
                                                    "without one live in 'global'."}),
        Option("kind", help="fact (about the user or the world), note (something to keep, with its source) or "
                            "decision (what was decided).", default="fact", choices=KINDS),
        _tags("Labels to filter by later.", cli={"name": "tag", "flags": ("--tag", "-t"),
                                                 "help": "Labels to filter by later (repeatable)."}),
        Option("source", help="Where the memory comes from (URL, file, book).",
               faces={"mcp": "an agent's memory is its own words"}),
        Option("rationale", help="Why (decisions).", faces={"mcp": "an agent stores plain facts"}),
        Option("alternatives", many=True, help="Alternatives considered (decisions).",
               faces={"cli": {"name": "alternative", "flags": ("--alternative",),
                              "help": "An alternative considered (repeatable)."},
                      "mcp": "an agent stores plain facts"}),
        Option("meta", dict, "More front matter keys.", faces={"cli": "--jsonl carries other keys per line",
                                                                "serve": "not over HTTP yet", "mcp": "not for agents"}),
        Option("created_at", help="When it was true, if not now (ISO 8601).",
               faces={"cli": "--jsonl carries created_at per line", "serve": "not over HTTP yet",
                      "mcp": "an agent's memories are of now"}),
        Option("each_line", bool, "One memory per non-empty line (list markers stripped).", default=False,
               faces={"mcp": "an agent adds one memory a call"}),
        Option("allow_duplicate", bool, "Store a text even when a live memory of the conversation already says "
                                        "exactly that.", default=False,
               faces={"mcp": "an agent never needs a copy"}),
        Option("extract", bool, "Let memvault's LLM pick out the facts of the text and retire the memories they "
                                "contradict, instead of storing the text as it is (kind fact, no tags).",
               default=False,
               faces={"cli": {"help": "Let the LLM extract facts from what the text states (never from a question "
                                      "or request) and reconcile them instead of storing the text verbatim (with "
                                      "--jsonl: learn from the turns, cut them into episodes)."}}),
        Option("progress", help="A callback (done, total) while a long add runs.", faces=_CALLBACK),
    ),
    where={"cli": "memvault add", "serve": "POST /v1/memories", "mcp": "add_memory"},
    own={"cli": ("ctx", "text", "file", "jsonl", "json_output")},
)

RECENT = Request(
    call="recent",
    options=(
        _conversation("Only this conversation; none: every conversation.",
                      mcp={"help": "Only this conversation; leave out for every conversation."}),
        Option("limit", int, "How many memories.", default=20, ge=1,
               faces={"cli": {"name": "max_count", "flags": ("-n", "--max-count"), "help": "Show at most N memories."},
                      "serve": {"le": 1000}, "mcp": {"le": 200}, "page": {"default": 50, "le": 500}}),
        _kinds("Only these kinds (default: every kind).",
               mcp={"name": "kind", "many": False, "help": "Only this kind; leave out for facts, notes and decisions."}),
        _tags("Only memories with these tags.", mcp="an agent asks for the newest"),
        Option("since", help="Only memories created at or after this ISO 8601 date or time.", metavar=ISO,
               faces={"mcp": "an agent asks for the newest"}),
        Option("until", help="Only memories created at or before this ISO 8601 date or time.", metavar=ISO,
               faces={"mcp": "an agent asks for the newest"}),
        Option("deleted", bool, "List the deleted memories (tombstones) instead.", default=False,
               faces={"mcp": "an agent sees live memories"}),
        _as_of("The memories the vault held at this ISO 8601 date or time: those created later left out, those "
               "deleted or replaced since shown as they were."),
        Option("cursor", help="The next page: the next_cursor the page before gave (with the same other options).",
               metavar="CURSOR"),
    ),
    where={"cli": "memvault ls", "serve": "GET /v1/memories", "mcp": "recent_memories", "page": "GET /"},
    own={"cli": ("ctx", "all_conversations", "json_output")},
)

LOG = Request(
    call="log",
    options=(
        Option("id_or_prefix", help="Follow one memory (id or unique prefix), through its replacements.",
               argument=True, metavar="[ID]", complete="memory",
               faces={"cli": {"name": "memory_id"}, "serve": {"name": "memory_id"}, "mcp": {"name": "id"},
                      "page": "a memory's page shows its story"}),
        Option("limit", int, "At most this many commits.", ge=1,
               faces={"cli": {"name": "max_count", "flags": ("-n", "--max-count")},
                      "mcp": {"default": 20, "le": 500}, "page": {"default": 30, "le": 500}}),
        Option("since", help="Only commits after this date (git syntax, or ISO 8601).",
               faces={"mcp": "an agent pages by limit"}),
        Option("until", help="Only commits before this date (git syntax, or ISO 8601).",
               faces={"mcp": "an agent pages by limit"}),
        Option("max_changes", int, "At most this many changes shown per commit.", ge=1,
               faces={"cli": "-v and --json show every change, else the first few",
                      "mcp": "the tool shows a fixed number", "page": {"default": 20}}),
    ),
    where={"cli": "memvault log", "mcp": "memory_history", "page": "GET /changes"},
    own={"cli": ("ctx", "json_output")},
)

REVIEW = Request(
    call="review",
    options=(
        _conversation("Only this conversation (default: every one).",
                      mcp={"help": "Only this conversation; leave out for every conversation."}),
        Option("limit", int, "List at most this many.", ge=1,
               faces={"cli": {"name": "max_count", "flags": ("-n", "--max-count"), "help": "List at most N."},
                      "serve": {"le": 1000}, "mcp": {"default": 20, "le": 200}}),
    ),
    where={"cli": "memvault review", "serve": "GET /v1/memories/review", "mcp": "review_memories",
           "page": "GET /review"},
    own={"cli": ("ctx", "memory_ids", "keep", "reject", "text", "reason", "json_output")},
)

GET = Request(
    call="get",
    options=(
        _memory_id(),
        _as_of("The memory as the vault held it at this ISO 8601 date or time (an error if it did not)."),
    ),
    where={"cli": "memvault show", "serve": "GET /v1/memories/{memory_id}", "mcp": "get_memory"},
    own={"cli": ("ctx", "raw", "json_output")},
)

DELETE = Request(
    call="remove",
    options=(
        Option("ids", many=True, help="The memories' ids, or unique prefixes of at least 4 characters.",
               required=True, argument=True, metavar="ID", complete="live_memory",
               faces={"cli": {"name": "memory_ids"},
                      "serve": {"name": "memory_id", "many": False, "help": "The memory's id, or a unique prefix."},
                      "mcp": {"name": "id", "many": False, "help": "The memory's id, or a unique prefix of at "
                                                                  "least 4 characters."},
                      "page": {"name": "memory_id", "many": False, "help": "The memory's id."}}),
        Option("now", help="The moment of the deletion.", faces=library_only("the clock of tests")),
        Option("reason", help="Why, in a few words; kept with the deleted memory (deleted_note)."),
    ),
    where={"cli": "memvault rm", "serve": "DELETE /v1/memories/{memory_id}", "mcp": "delete_memory",
           "page": "POST /memory/{memory_id}/remove"},
    own={"cli": ("ctx", "json_output")},
)

SUMMARY = Request(
    call="summary",
    options=(Option("conversation", help="The conversation id, such as 'global' or 'work'.", default="global",
                    faces={"cli": "memvault summarize --print shows it",
                           "serve": "not over HTTP yet",
                           "mcp": {"required": True}}),),
    where={"mcp": "conversation_summary"},
)

STATS = Request(call="stats", options=(), where={"cli": "memvault stats", "serve": "GET /v1/stats",
                                                 "mcp": "vault_stats"},
                own={"cli": ("ctx", "json_output")})

CHAT = Request(
    call="chat",
    options=(
        Option("message", help="The message; none reads stdin (or starts an interactive chat on a terminal).",
               required=True, faces={"cli": "MESSAGE words or stdin, read by the CLI",
                                     "serve": "the last user message of the request"}),
        _conversation("Conversation id.", "global",
                      serve="the X-Memvault-Conversation header (OpenAI's protocol: also metadata.conversation_id "
                            "or user)"),
        Option("stream", bool, "Print the reply as it comes.", default=True, negate="Print the reply in one piece.",
               faces={"cli": {"name": "no_stream", "flags": ("--no-stream",)}, "serve": "the request's `stream`"}),
        Option("learn", bool, "Learn facts from this message.", default=True,
               negate="Do not extract facts from this message.",
               faces={"cli": {"name": "no_learn", "flags": ("--no-learn",)}, "serve": "a proxy always learns"}),
        Option("use_memory", bool, "Retrieve memories for the message.", default=True,
               negate="Do not retrieve memories.",
               faces={"cli": {"name": "no_memory", "flags": ("--no-memory",)}, "serve": "a proxy always retrieves"}),
        Option("now", help="Clock override, ISO 8601 (scripts, tests).", metavar=ISO,
               faces={"serve": "a client's clock is the real one"}),
        Option("model", help="litellm model string (default: the llm_model setting).", setting="llm_model",
               faces={"serve": "the request's `model`"}),
        Option("top_k", int, "How many memories to inject (default: the default_top_k setting).", ge=1,
               setting="default_top_k", faces={"cli": "the default_top_k setting", "serve": "the default_top_k setting"}),
        Option("history", help="The messages before this one, as the client keeps them (OpenAI shape).",
               faces={"cli": "the CLI keeps memvault's own session", "serve": "the request's messages"}),
        Option("user_message", help="The client's own message object for this message.",
               faces={"cli": "the CLI sends text", "serve": "the request's last user message"}),
        Option("llm_options", help="Sampling options for the model.",
               faces={"cli": "the settings", "serve": "the request's other fields"}),
        Option("forward", help="A proxy's request, handed to the upstream as the client sent it.",
               faces=library_only("what a proxy asks for")),
        Option("after_user", help="A tool round after the message.",
               faces={"cli": "the CLI has no tools", "serve": "the request's messages after the user's"}),
        Option("resent", bool, "The client's retry of this message.", default=False,
               faces={"cli": "the CLI does not retry", "serve": "the header x-stainless-retry-count"}),
    ),
    # serve's POST /v1/chat/completions (OpenAI's protocol) and POST /v1/messages (Anthropic's) are chats
    # whose request is the client's own: `forward`.
    where={"cli": "memvault chat"},
    own={"cli": ("ctx", "message", "context", "clear", "json_output")},
)

# -- what the page asks (faces/routes_page.py); the CLI's commands for these take their options by hand ---------

def _page_of_one(call: str, route: str, help_: str = MEMORY_ID_HELP) -> Request:
    """A page request whose one option is the memory's id, in its path."""
    return Request(call=call, options=(_memory_id(help_),), where={"page": route})


DETAILS = _page_of_one("details", "GET /memory/{memory_id}")

EDIT = Request(
    call="edit",
    options=(
        _memory_id(),
        Option("text", help="The memory's new text (its front matter is kept).",
               faces={"page": {"required": True}}),
        Option("editor", many=True, help="The editor command (default: $VISUAL, else $EDITOR).",
               faces={**library_only("the CLI's $VISUAL or $EDITOR"), "page": "a page edits in its own text box"}),
        Option("retry", help="Asked after an edit that did not validate: open the editor again?", faces=_CALLBACK),
        Option("expected", help="The text the new one was written over: refused when the memory holds another now.",
               faces={"page": {"required": True}}),
    ),
    where={"page": "POST /memory/{memory_id}/edit"},
)

RESTORE = _page_of_one("restore", "POST /memory/{memory_id}/restore",
                       "The deleted memory's id, or a unique prefix of at least 4 characters.")

UNDO = Request(
    call="undo",
    options=(Option("commit", help="The memvault change to take back (default: the newest not taken back yet).",
                    metavar="COMMIT"),),
    where={"page": "POST /undo"},
)

DECIDE = Request(
    call="review_decide",
    options=(
        Option("keep", many=True, help="Learned facts to keep: a waiting one goes live, a proposal retires what it "
                                       "names."),
        Option("reject", many=True, help="Learned facts to reject: soft-deleted; what they retired comes back."),
        Option("text", help="With keep and one fact: keep it with these words."),
        Option("reason", help="With reject: why, kept with the rejected fact."),
    ),
    where={"page": "POST /review"},
)

CONVERSATIONS = Request(call="conversations", options=(), where={"page": "GET /conversations"})

CONVERSATION = Request(
    call="conversation",
    options=(
        Option("conversation", help="The conversation id, such as 'global' or 'work'.", default="global"),
        Option("episodes", int, "At most this many of its newest episodes.", default=20, ge=0,
               faces={"page": {"le": 500}}),
    ),
    where={"page": "GET /conversations/{conversation}"},
)

REQUESTS = (SEARCH, ADD, RECENT, LOG, REVIEW, GET, DELETE, SUMMARY, STATS, CHAT,
            DETAILS, EDIT, RESTORE, UNDO, DECIDE, CONVERSATIONS, CONVERSATION)
