"""The read path of one open vault, as the front door runs it (docs/design.md, "The read path"): the index
brought in step with the files before each read (store/reindex.py `fresh_index`, one sync at a time in
the process), a search's options checked and made a retrieval.Query, the search run (what the vault held
`as_of` a moment, or now; a table version another process's upkeep pruned is read again at the newest),
the LLM's order (setting llm_rerank), and the memories a chat's message is given.

`Memvault` holds one `Reader`; the search methods of the front door are one call each into it.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Mapping

from memvault.errors import MemvaultError, NothingGiven, UsageError
from memvault.store import files
from memvault.store.files import DEFAULT_CONVERSATION, option_time

RETRIEVERS = ("hybrid", "dense", "bm25")


class Reader:
    """The vault's reads: `fresh_index`, `query`, `run`, `search`, `search_many`, `chat_memories`."""

    def __init__(self, vault, watcher=None):
        self.vault, self.watcher = vault, watcher
        self.lock = threading.Lock()  # one index sync at a time in this process
        self._llm_orderer = None  # made on first use: llm_rerank imports pydantic
        self._llm_splitter = None  # the same for llm_query_parts

    def say(self, message: str) -> None:
        self.vault.say(message)

    def fresh_index(self):
        """The index, in step with the files before a read (store/reindex.py, fresh_index)."""
        from memvault.store.reindex import fresh_index

        return fresh_index(self.vault, self.watcher, self.lock, self.say)

    def say_if_unknown(self, conversation: str) -> None:
        """A conversation asked for by name that the vault does not have (a typo?): said with the ones
        whose names are close, on the notice channel; asking is not an error."""
        from memvault.reading import browse

        vault = self.vault
        if conversation == DEFAULT_CONVERSATION or not vault.entries.is_dir() \
                or (vault.entries / files.conversation_slug(conversation)).is_dir():
            return
        self.say(f"memvault: no conversation {conversation!r} in the vault{browse.close_ones(vault, conversation)}")

    def query(self, text: str, *, kinds=None, since=None, until=None, now=None, as_of=None, retriever: str = "hybrid",
              conversation: str = DEFAULT_CONVERSATION, tags: Iterable[str] = (), **options: Any):
        """A search's options, checked, as a retrieval.Query (those left None: the settings')."""
        from memvault.reading.retrieval import Query

        files.check_conversation_id(conversation)
        if retriever not in RETRIEVERS:
            raise UsageError(f"unknown retriever {retriever!r} (hybrid, dense or bm25)")
        roles = files.roles_for_kinds(kinds)
        extra = {"roles": roles} if roles else {}
        moment = option_time(as_of, "as_of")
        return Query.from_settings(self.vault.settings, text, conversation=conversation, tags=tuple(tags or ()),
                                   since=option_time(since, "since"), until=option_time(until, "until"),
                                   now=option_time(now, "now") or moment, as_of=moment,
                                   use_dense=retriever != "bm25", use_bm25=retriever != "dense", **extra, **options)

    def run(self, query):
        """The whole read path for one Query (retrieval.read): a SearchOutcome."""
        from memvault.reading.retrieval import read

        self.vault.require_existing()
        started = time.perf_counter()
        self._embed_ahead(query.text)  # the search's own embed_query waits for it, after reading the question's times
        index = self.fresh_index()

        def once(held):
            return read(held, query, self.vault.settings, self.say, self.llm_order,
                        sync_seconds=time.perf_counter() - started, llm_parts=self.llm_parts)

        if query.as_of is not None:
            from memvault.reading.as_of import index_at

            with index_at(self.vault, index, query.as_of) as held:
                return once(held)
        try:
            return once(index)
        except RuntimeError as exc:
            if not index.table_gone(exc):
                raise
            index.refresh()  # another process's upkeep pruned the version this handle held
            return once(index)

    def _embed_ahead(self, text: str) -> None:
        """A thread making the query's vector while the index is brought in step (git's answer, LanceDB's
        manifest: the model runs meanwhile), in a process that has the model loaded already (warm: the agent,
        serve); the search then finds it made, or waits for it (Embedder.embed_query). Not when cold: loading
        the model in a thread beside the index's imports is not done."""
        from memvault.store.models import loaded_embedder

        embedder = loaded_embedder(self.vault.settings.embedding_model) if text.strip() else None
        if embedder is None:
            return

        def embed() -> None:
            try:
                embedder.embed_query(text)
            except Exception:  # the search's own call says what is wrong
                pass

        _ahead().submit(embed)

    def search(self, text: str, *, all_conversations: bool = False, conversation: str | None = None,
               **options: Any):
        """`Memvault.search`: one conversation (None: global) and global, or every conversation; not both."""
        if all_conversations and conversation is not None:
            raise UsageError("conversation and all_conversations do not go together",
                             params=("conversation", "all_conversations"))
        if not isinstance(text, str) or not text.strip():
            raise NothingGiven("nothing to search for: the query is empty", params="query")
        conversation = conversation or DEFAULT_CONVERSATION
        query = self.query(text, conversation=conversation, all_conversations=all_conversations, **options)
        if not all_conversations:
            self.say_if_unknown(conversation)
        return self.run(query)

    def search_many(self, requests: Iterable[Mapping[str, Any]], origin: str = "queries",
                    **defaults: Any) -> Iterator[tuple[Any, Any]]:
        """Many searches over one loaded index: each request a mapping with "query" and optionally
        "qid", "conversation_id", "now", "k"; `defaults` are `search`'s options for all. Yields (qid,
        SearchOutcome) in order; a bad request is a UsageError naming its number in `origin`."""
        for number, request in enumerate(requests, 1):
            where = f"{origin} line {number}"
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
                query = self.query(request["query"], **options)
            except (ValueError, TypeError, MemvaultError) as exc:
                raise UsageError(f"{where}: {exc}") from None
            yield request.get("qid"), self.run(query)

    def chat_memories(self, conversation: str) -> Callable[..., list]:
        """What chat.start calls for a message's memories: a search of the conversation (and global) at
        the message's clock, its own session's turns left out by the filter."""

        def memories(text: str, top: int, clock: datetime, skip_turns_since: datetime | None, skip_ids: tuple):
            if not self.vault.exists():
                return []  # the first chat of a new vault
            # A conversation the vault does not have yet is no typo here: the chat starts it.
            return self.run(self.query(text, top_k=top, conversation=conversation, now=clock,
                                       skip_turns_since=skip_turns_since, skip_ids=skip_ids)).results

        return memories

    def warm(self, search: bool = True) -> None:
        """`Memvault.warm`: the embedding model's first inference (ONNX Runtime's buffers), detect-secrets,
        and one search of every conversation (the reranker, the table, what a first query reads); search
        False: the models and libraries only, the reranker's absence not said (each search says it)."""
        from memvault.store import secret_scan

        index = self.vault.index
        index.embedder.embed(["warm-up"])
        secret_scan.warm(self.vault)  # a server's first chat does not wait for detect-secrets' import
        if not search:
            from memvault.reading.retrieval import load_reranker

            load_reranker(self.vault.settings, warn=lambda reason: None)
            if self.vault.exists():
                index.table()  # LanceDB's import and its first open
            return
        if self.vault.exists():
            self.run(self.query("warm up", all_conversations=True, top_k=1))

    def llm_order(self, question: str, results: list) -> list:
        """The LLM's order (setting llm_rerank); one per vault object, so a failure is said once."""
        if self._llm_orderer is None:
            from memvault.reading.llm_rerank import LLMOrder

            self._llm_orderer = LLMOrder(self.vault.settings, self.say)
        return self._llm_orderer(question, results)

    def llm_parts(self, question: str):
        """The LLM's parts of a question (setting llm_query_parts); one asker per Reader, so a failure
        is said once."""
        if self._llm_splitter is None:
            from memvault.reading.llm_parts import LLMParts

            self._llm_splitter = LLMParts(self.vault.settings, self.say)
        return self._llm_splitter(question)


_AHEAD = None
_AHEAD_LOCK = threading.Lock()


def _ahead():
    """The one thread that makes queries' vectors ahead (Reader._embed_ahead), kept for the process's life:
    a thread per search paid ONNX Runtime's first inference in a new thread every time (~1.5 ms of CPU of a
    ~6 ms query). A search whose vector is still queued here makes it itself (Embedder.embed_query), and the
    queued call then finds it made."""
    global _AHEAD
    with _AHEAD_LOCK:
        if _AHEAD is None:
            from concurrent.futures import ThreadPoolExecutor

            _AHEAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memvault-embed-ahead")
        return _AHEAD
