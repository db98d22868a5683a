"""One definition per request: the options of the library calls that more than one face offers
(`Memvault.search`, `add`, `recent`, `log`), each with its help words, and for each face (cli, serve,
mcp) the name it gives an option where that differs and what it leaves out, with why.

The faces are checked against these definitions (tests/test_requests.py): an option added to a
library call must be listed here, and then reach every face or be left out of it by name, or that
test fails; a face that takes an option the library does not fails it too."""

from __future__ import annotations

from dataclasses import dataclass, field

FACES = ("cli", "serve", "mcp")


@dataclass(frozen=True)
class Request:
    """A library call as the faces offer it. `options`: its parameters (in the library's names), each
    with its help words. Per face: `names` where the face calls an option otherwise, `left_out` what it
    does not offer (with why), `own` what only that face has (output format, a context). A face that
    does not offer the request at all has no entry in `where`."""

    call: str
    options: dict[str, str]
    where: dict[str, str]  # face -> the command, route or tool that offers it
    names: dict[str, dict[str, str]] = field(default_factory=dict)
    left_out: dict[str, dict[str, str]] = field(default_factory=dict)
    own: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def face_name(self, face: str, option: str) -> str:
        return self.names.get(face, {}).get(option, option)

    def expected(self, face: str) -> set[str]:
        """The parameter names the face must take: every option it does not leave out, in its names,
        and its own."""
        left = self.left_out.get(face, {})
        return {self.face_name(face, o) for o in self.options if o not in left} | set(self.own.get(face, ()))


_TUNING = "tuning for scripts and experiments; an agent gets the settings' values"

SEARCH = Request(
    call="search",
    options={
        "query": "What to look for, in words: a question or a few keywords.",
        "top_k": "How many results (default_top_k).",
        "conversation": "The conversation to search, plus global.",
        "all_conversations": "Search every conversation.",
        "kinds": "Only these kinds: fact, note, decision, turn, episode.",
        "tags": "Only memories with these tags.",
        "since": "Only memories created at or after this ISO 8601 date or time.",
        "until": "Only memories created at or before this ISO 8601 date or time.",
        "now": "The clock for recency (scripts, tests).",
        "rerank": "Use the cross-encoder where one is available.",
        "recency_weight": "Weight of recency in the score (recency_weight).",
        "mmr_lambda": "MMR trade-off; 1.0 = no diversity (mmr_lambda).",
        "threshold": "Drop results whose relevance is below this.",
        "retriever": "Candidates from hybrid, dense or bm25.",
        "relevance_floor": "Without a reranker: leave out memories whose match is below this (relevance_floor).",
        "session_weight": "How much the rest of a memory's session lifts it; 0 = off (session_weight).",
        "as_of": "Search what the vault held at this ISO 8601 date or time (later memories absent, ones deleted since as they were).",
    },
    where={"cli": "memvault search", "serve": "POST /v1/memories/search", "mcp": "search_memory"},
    names={"cli": {"kinds": "kind", "tags": "tag", "rerank": "no_rerank"},
           "serve": {"conversation": "conversation_id"},
           "mcp": {"kinds": "kind"}},
    left_out={"mcp": {"all_conversations": "a search without a conversation searches every conversation",
                      "tags": "an agent searches by words", "now": "an agent's clock is the real one",
                      "rerank": _TUNING, "recency_weight": _TUNING, "mmr_lambda": _TUNING, "threshold": _TUNING,
                      "retriever": _TUNING, "relevance_floor": _TUNING, "session_weight": _TUNING}},
    own={"cli": ("ctx", "explain", "output_format", "queries", "json_output")},
)

ADD = Request(
    call="add",
    options={
        "text": "The memory text.",
        "conversation": "Conversation id.",
        "kind": "fact, note or decision.",
        "tags": "Labels to filter by later.",
        "source": "Where the memory comes from (URL, file, book).",
        "rationale": "Why (decisions).",
        "alternatives": "Alternatives considered (decisions).",
        "meta": "More front matter keys.",
        "created_at": "When it was true, if not now (ISO 8601).",
        "each_line": "One memory per non-empty line (list markers stripped).",
        "allow_duplicate": "Store a text a live memory already holds word for word.",
        "progress": "A callback (done, total) while a long add runs.",
    },
    where={"cli": "memvault add", "serve": "POST /v1/memories", "mcp": "add_memory"},
    names={"cli": {"tags": "tag", "alternatives": "alternative"}, "serve": {"conversation": "conversation_id"}},
    left_out={
        "cli": {"meta": "--jsonl carries other keys per line", "created_at": "--jsonl carries created_at per line",
                "progress": "the CLI draws its own bar"},
        "serve": {"meta": "not over HTTP yet", "created_at": "not over HTTP yet", "progress": "a callback"},
        "mcp": {"source": "an agent's memory is its own words", "rationale": "an agent stores plain facts",
                "alternatives": "an agent stores plain facts", "meta": "not for agents",
                "created_at": "an agent's memories are of now", "each_line": "an agent adds one memory a call",
                "allow_duplicate": "an agent never needs a copy", "progress": "a callback"},
    },
    own={"cli": ("ctx", "file", "jsonl", "extract", "json_output"), "serve": ("extract",), "mcp": ("extract",)},
)

RECENT = Request(
    call="recent",
    options={
        "conversation": "Only this conversation; none: every conversation.",
        "limit": "How many memories.",
        "kinds": "Only these kinds.",
        "tags": "Only memories with these tags.",
        "since": "Only memories created at or after this ISO 8601 date or time.",
        "until": "Only memories created at or before this ISO 8601 date or time.",
        "deleted": "List deleted memories instead.",
        "as_of": "The memories the vault held at this ISO 8601 date or time.",
        "cursor": "The page after the one that gave this next_cursor (the same filters).",
    },
    where={"cli": "memvault ls", "serve": "GET /v1/memories", "mcp": "recent_memories"},
    names={"cli": {"kinds": "kind", "tags": "tag", "limit": "max_count"}, "serve": {"conversation": "conversation_id"},
           "mcp": {"kinds": "kind"}},
    left_out={"mcp": {"tags": "an agent asks for the newest", "since": "an agent asks for the newest",
                      "until": "an agent asks for the newest", "deleted": "an agent sees live memories"}},
    own={"cli": ("ctx", "all_conversations", "json_output")},
)

LOG = Request(
    call="log",
    options={
        "id_or_prefix": "Follow one memory (id or unique prefix).",
        "limit": "At most this many commits.",
        "since": "Only commits after this date (git syntax).",
        "until": "Only commits before this date (git syntax).",
        "max_changes": "At most this many changes shown per commit.",
    },
    where={"cli": "memvault log", "mcp": "memory_history"},
    names={"cli": {"id_or_prefix": "memory_id", "limit": "max_count"}, "mcp": {"id_or_prefix": "id"}},
    left_out={"cli": {"max_changes": "-v and --json show every change, else the first few"},
              "mcp": {"since": "an agent pages by limit", "until": "an agent pages by limit", "max_changes": "the tool shows a fixed number"}},
    own={"cli": ("ctx", "json_output")},
)

REQUESTS = (SEARCH, ADD, RECENT, LOG)
