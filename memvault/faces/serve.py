"""`memvault serve`: an OpenAI-compatible memory proxy over HTTP (docs/design.md, 11).

A client that speaks OpenAI's chat-completions protocol (Open WebUI, the `openai` package, an editor
plugin, curl) points its base URL here instead of at the model, and its conversations gain long-term
memory. A face, like the CLI and `memvault mcp`: each route parses its input, makes the library call
(`Memvault.chat` with the client's history, `search`, `add`, `get`, `remove`, `llm_models`) and renders
the result, in OpenAI's shapes or in those of the CLI's `--json`.

- The vault is opened once with watch=True and warmed before the port answers (models, index,
  litellm), so requests pay for none of it and see hand edits and other processes' writes.
- Requests run concurrently: blocking library calls run on worker threads; a streamed reply is read
  by a thread of its own, whose pieces the event loop sends on as they come. The vault lock is held
  only inside the library's short writes, never while the model answers (docs/design.md, 9).
- The response ends as soon as the model's reply does; both turns are stored and committed meanwhile
  (`ChatTurn.on_reply`). The memory upkeep of a turn (extraction, reconciliation, summary) runs
  after that, one turn at a time on one worker thread, so a client never waits for it.
- A client that hangs up mid-reply: what arrived is stored, marked partial (`ChatTurn.close`).
- SIGTERM, SIGHUP and SIGINT (also when the process started with SIGINT ignored: the rule of every
  long-running command, memvault/store/signals.py) stop it cleanly: in-flight
  requests get a few seconds, then the upkeep a few more; replies still waiting for the model are
  stored as they are (`ChatTurn.abandon`); the process takes the vault lock, so that none of its
  threads is half way through a write, and leaves with exit code 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import itertools
import json
import os
import queue
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal

import anyio
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from memvault import __version__
from memvault.store import files, signals
from memvault.faces import term
from memvault.errors import (AlreadyDeleted, IndexUnreadable, LLMError, LLMTimeout, LockTimeout, MemvaultError,
                             NotFound, NothingGiven, UsageError, VaultStateError, as_memvault_error, validation_problem)

DEFAULT_PORT = 8100
DEFAULT_MAX_BODY_MB = 8.0
CONVERSATION_HEADER = "x-memvault-conversation"
RETRY_HEADER = "x-stainless-retry-count"  # openai-python numbers its retries of a request
# Request fields whose type is checked here (a wrong one is the client's mistake, said with its
# name); these and every other field the client sends go to the upstream as they are (llm.py,
# OPENAI_FIELDS), but for those that name the conversation (`user`, `metadata`) and those that are
# ours to honour (`messages`, `model`, `stream`, `n`).
SAMPLING = {"temperature": (int, float), "top_p": (int, float), "presence_penalty": (int, float),
            "frequency_penalty": (int, float), "max_tokens": int, "max_completion_tokens": int, "seed": int,
            "stop": (str, list), "response_format": dict, "tools": list, "tool_choice": (str, dict),
            "logprobs": bool, "top_logprobs": int, "logit_bias": dict, "reasoning_effort": str,
            "stream_options": dict, "parallel_tool_calls": bool}
NOT_PASSED = {"messages", "model", "stream", "n", "user", "metadata"}
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
MODELS_TTL = 60.0  # seconds the upstream's model list is trusted (clients send `model` on every request)
GRACE_REQUESTS = 3.0  # seconds in-flight requests get to finish after SIGTERM
# Seconds a complete reply waits, before it is stored, for its response to be sent: the store's
# Python work would hold the GIL the event loop needs to send it (a response that is never sent,
# its client gone, waits this long).
SEND_WAIT = 1.0
SWITCH_INTERVAL = 0.001  # seconds; proxy overhead 52 -> 49 ms (bench/serve.py, 10,000 memories)
GRACE_UPKEEP = 2.0  # then seconds the running upkeep gets
GRACE_LOCK = 30.0  # at most this long for a write of this process under way (they take a moment)


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    conversation: str = files.DEFAULT_CONVERSATION  # for requests that name none
    max_body: int = int(DEFAULT_MAX_BODY_MB * 1024 * 1024)
    api_key: str | None = None
    access_log: bool = False


# -- errors in OpenAI's shape ---------------------------------------------------------------------

class ApiError(Exception):
    """A refusal with its HTTP status, in OpenAI's error shape."""

    def __init__(self, status: int, message: str, param: str | None = None, kind: str = "invalid_request_error",
                 code: str | None = None, retry: bool | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = status, message, param, kind, code
        self.retry = retry  # False: a retry cannot help (the header x-should-retry, which openai clients obey)


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None, background=None) -> Response:
    return Response(json.dumps(data, ensure_ascii=False, default=str), status_code=status, headers=headers,
                    media_type="application/json", background=background)


def as_api_error(exc: BaseException) -> ApiError:
    """A library failure as the HTTP status a client understands; its message is the library's one
    line (an LLM failure names the upstream URL and never the key)."""
    if isinstance(exc, ApiError):
        return exc
    exc = as_memvault_error(exc) or exc  # LanceDB's and git's failures in the words the CLI gives
    if isinstance(exc, IndexUnreadable):
        return ApiError(503, str(exc), kind="server_error", code="index_unreadable")
    if isinstance(exc, AlreadyDeleted):  # deleting (or editing) a deleted memory: the client's mistake, not ours
        return ApiError(409, str(exc), kind="invalid_request_error", code="memory_deleted")
    if isinstance(exc, NotFound):
        return ApiError(404, str(exc), kind="not_found_error", code="memory_not_found")
    if isinstance(exc, LLMTimeout):  # a retry would wait llm_timeout again
        return ApiError(504, str(exc), kind="upstream_error", code="upstream_timeout", retry=False)
    if isinstance(exc, LLMError):
        if exc.status in (400, 422):  # the upstream refused what the client asked for (a bad option)
            return ApiError(400, str(exc), code="upstream_refused")
        # An upstream that refuses the key, does not know the model or is not there at all will not
        # within a client's retry; one that failed (5xx) may (and a retried message is one turn).
        hopeless = exc.status is None or exc.status < 500
        return ApiError(502, str(exc), kind="upstream_error", code="upstream_unavailable",
                        retry=False if hopeless else None)
    if isinstance(exc, (UsageError, NothingGiven)):  # the library names the body's fields, its parameters
        return ApiError(400, str(exc), exc.params[-1] if exc.params else None)
    if isinstance(exc, LockTimeout):
        return ApiError(503, str(exc), kind="server_error", code="vault_busy")
    if isinstance(exc, VaultStateError):
        return ApiError(409, str(exc), kind="server_error", code="vault_state")
    if isinstance(exc, MemvaultError):
        return ApiError(500, str(exc), kind="server_error")
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return ApiError(500, f"{where}{exc.strerror or exc}", kind="server_error")
    return ApiError(500, f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                    kind="server_error")


def _refusal(exc: ApiError) -> Response:
    headers = {"x-should-retry": "false"} if exc.retry is False else None
    return _json(error_body(exc.message, exc.kind, exc.param, exc.code), exc.status, headers=headers)


class Guard:
    """The outermost layer: the API key (when one is set) and the size of the request body, both
    settled before the application reads anything."""

    def __init__(self, app, max_body: int, api_key: str | None):
        self.app, self.max_body, self.api_key = app, max_body, api_key

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.api_key and scope["path"] != "/health" and not self._authorized(headers.get("authorization", "")):
            await self._send(send, 401, error_body(
                "missing or wrong API key: send the header `Authorization: Bearer <key>` with the key set in "
                "MEMVAULT_SERVE_API_KEY", "invalid_request_error", code="invalid_api_key"))
            return
        too_large = ApiError(413, f"request body over {self.max_body:,} bytes (memvault serve --max-body-mb)",
                             code="request_too_large")
        try:
            declared = int(headers.get("content-length") or 0)
        except ValueError:
            declared = 0
        if declared > self.max_body:
            await self._send(send, 413, error_body(too_large.message, too_large.kind, code=too_large.code))
            return
        # The whole body, counted as it comes (a chunked one has no length), then handed on.
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                await self._send(send, 413, error_body(too_large.message, too_large.kind, code=too_large.code))
                return
            more = message.get("more_body", False)
        given = False

        async def replay():
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorized(self, header: str) -> bool:
        scheme, _, key = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(key.strip().encode(), self.api_key.encode())

    @staticmethod
    async def _send(send, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})


# -- requests -------------------------------------------------------------------------------------

@dataclass
class ChatCall:
    """A chat-completions request, checked."""

    text: str  # the last user message's text: what retrieval uses and what is stored
    message: dict  # that message as the client sent it
    history: list[dict]  # the messages before it, passed on as they are
    after: list[dict]  # a tool round: the assistant's tool calls and the results after it, as they are
    conversation: str
    stream: bool
    model: str | None
    options: dict
    resent: bool = False  # the client's retry of this message (x-stainless-retry-count >= 1)


def parse_chat(body: dict, headers, default_conversation: str) -> ChatCall:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list of {role, content} objects", "messages")
    for number, message in enumerate(messages):
        where = f"messages[{number}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where} must be an object with role and content", where)
        if message.get("role") not in ROLES:
            raise ApiError(400, f"{where}.role must be one of {', '.join(sorted(ROLES))} "
                                f"(got {json.dumps(message.get('role'))[:40]})", f"{where}.role")
    # The user's message is the last one, or the last before a tool round (the assistant's tool
    # calls and their results, which the client sends back for the model's answer).
    at = max((n for n, m in enumerate(messages) if m["role"] == "user"), default=None)
    last = messages[-1]
    if at is None or (at != len(messages) - 1 and last["role"] not in ("tool", "function")) or \
            any(m["role"] not in ("assistant", "tool", "function") for m in messages[at + 1:]):
        raise ApiError(400, f"the last message must be the user's, or a tool's result after it (got role "
                            f"{last['role']!r}): memvault serve answers a user message with memories",
                       f"messages[{len(messages) - 1}].role")
    text = _text(messages[at].get("content"), f"messages[{at}].content")
    if body.get("n", 1) != 1:
        raise ApiError(400, "n must be 1: memvault serve stores one reply per message", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false", "stream")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model must be a string", "model")
    options = {}
    for name, value in body.items():
        if name in NOT_PASSED or value is None:
            continue
        kind = SAMPLING.get(name)
        if kind is not None and (not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)):
            raise ApiError(400, f"{name} has the wrong type (got {json.dumps(value)[:40]})", name)
        options[name] = value
    if not stream:
        options.pop("stream_options", None)  # only for a stream (upstreams refuse it otherwise)
    return ChatCall(text, messages[at], messages[:at], messages[at + 1:],
                    conversation_of(body, headers, default_conversation), stream, model, options,
                    resent=(headers.get(RETRY_HEADER) or "0").strip() not in ("", "0"))


def _text(content: Any, where: str) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str))
    else:
        raise ApiError(400, f"{where} must be a string or a list of content parts", where)
    if not text.strip():
        raise ApiError(400, f"{where} has no text", where)
    return text


def conversation_of(body: dict, headers, default: str) -> str:
    """The conversation a request names: the X-Memvault-Conversation header, else
    metadata.conversation_id, else the `user` field, else the server's default."""
    metadata = body.get("metadata")
    candidates = [(headers.get(CONVERSATION_HEADER), "header X-Memvault-Conversation"),
                  (metadata.get("conversation_id") if isinstance(metadata, dict) else None,
                   "metadata.conversation_id"),
                  (body.get("user"), "user")]
    for value, where in candidates:
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise ApiError(400, f"{where} must be a string naming the conversation", where)
        try:
            files.check_conversation_id(value)
        except UsageError as exc:
            raise ApiError(400, f"{where}: {exc}", where) from None
        return value
    return default


class AddBody(BaseModel):
    """POST /v1/memories: what `memvault add` takes."""

    model_config = ConfigDict(extra="forbid")
    text: str | list[str]
    conversation_id: str | None = None
    kind: Literal["fact", "note", "decision"] = "fact"
    tags: list[str] = []
    source: str | None = None
    rationale: str | None = None
    alternatives: list[str] = []
    each_line: bool = False
    allow_duplicate: bool = False
    extract: bool = False


class SearchBody(BaseModel):
    """POST /v1/memories/search: what `memvault search` takes (checked against
    request_options.SEARCH by tests/test_requests.py)."""

    model_config = ConfigDict(extra="forbid")
    query: str
    top_k: int | None = Field(None, ge=1, le=1000)
    conversation_id: str | None = None
    all_conversations: bool = False
    kinds: list[Literal["fact", "note", "decision", "turn", "episode"]] = []
    tags: list[str] = []
    since: str | None = None
    until: str | None = None
    now: str | None = None
    as_of: str | None = None
    rerank: bool = True
    recency_weight: float | None = Field(None, ge=0, le=1)
    mmr_lambda: float | None = Field(None, ge=0, le=1)
    threshold: float | None = Field(None, ge=0, le=1)
    retriever: Literal["hybrid", "dense", "bm25"] = "hybrid"
    relevance_floor: float | None = Field(None, ge=0, le=1)
    session_weight: float | None = Field(None, ge=0, le=1)


class ListQuery(BaseModel):
    """GET /v1/memories: what `memvault ls` takes (`Memvault.recent`), newest first, a page at a time:
    `cursor` is the `next_cursor` of the page before."""

    model_config = ConfigDict(extra="forbid")
    conversation_id: str | None = None
    limit: int = Field(20, ge=1, le=1000)
    kinds: list[Literal["fact", "note", "decision", "turn", "episode"]] = []
    tags: list[str] = []
    since: str | None = None
    until: str | None = None
    deleted: bool = False
    as_of: str | None = None
    cursor: str | None = None

    LISTS: ClassVar[tuple[str, ...]] = ("kinds", "tags")  # query parameters given once per value


class ReviewBody(BaseModel):
    """POST /v1/memories/review: what `memvault review --keep` / `--reject` take."""

    model_config = ConfigDict(extra="forbid")
    keep: list[str] = []
    reject: list[str] = []
    text: str | None = None
    reason: str | None = None


def checked(model: type[BaseModel], body: dict) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]["loc"]
        raise ApiError(400, validation_problem(exc), ".".join(str(p) for p in first) or None) from None


async def json_object(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise ApiError(400, "request body is not UTF-8 JSON") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"request body is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") \
            from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


# -- what the server keeps track of ---------------------------------------------------------------

class Turns:
    """The exchanges under way, so that a stop can store the replies still waiting for the model."""

    def __init__(self):
        self._cond = threading.Condition()
        self._starting = 0
        self._live: set = set()
        self.stopping = False

    def start(self, make: Callable[[], Any]):
        with self._cond:
            if self.stopping:
                raise ApiError(503, "memvault serve is stopping", kind="server_error", code="stopping")
            self._starting += 1
        try:
            turn = make()  # retrieval, and the user's turn written (not committed yet)
            with self._cond:
                self._live.add(turn)
            return turn
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()

    def done(self, turn) -> None:
        with self._cond:
            self._live.discard(turn)

    def count(self) -> int:
        with self._cond:
            return len(self._live) + self._starting

    def stop(self, timeout: float) -> list:
        """Refuse new exchanges, wait for those being set up, and return those under way (their
        reply still coming, or being stored)."""
        with self._cond:
            self.stopping = True
            self._cond.wait_for(lambda: self._starting == 0, timeout)
            return list(self._live)


class Storing:
    """Per conversation, the exchanges whose reply is out and whose turns are being stored: the next
    request of the conversation waits for those (read-your-writes: a client that sends its next
    message at once, as agents do, finds the last exchange among its memories), and only those
    under way when it came (not later ones: several clients in one busy conversation would never
    find a moment with none); other conversations do not wait."""

    def __init__(self):
        self._cond = threading.Condition()
        self._under_way: dict[str, set[int]] = {}
        self._numbers = itertools.count()
        self.waits, self.waited = 0, 0.0  # requests that had to wait, and the seconds they waited (/health)

    def begin(self, conversation: str) -> int:
        with self._cond:
            number = next(self._numbers)
            self._under_way.setdefault(conversation, set()).add(number)
            return number

    def end(self, conversation: str, number: int) -> None:
        with self._cond:
            under_way = self._under_way.get(conversation, set())
            under_way.discard(number)
            if not under_way:
                self._under_way.pop(conversation, None)
            self._cond.notify_all()

    def wait(self, conversation: str, timeout: float) -> None:
        with self._cond:
            before = set(self._under_way.get(conversation, ()))
            if not before:
                return
            started = time.perf_counter()
            self._cond.wait_for(lambda: not before & self._under_way.get(conversation, set()), timeout)
            self.waits += 1
            self.waited += time.perf_counter() - started


class Upkeep:
    """The memory upkeep of each turn, after its response was sent: one at a time, in order, on one
    worker thread (two at once would ask the model about the same facts)."""

    def __init__(self, notice: Callable[[str], None], when_idle: Callable[[], Any] | None = None):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memvault-upkeep")
        self._when_idle = when_idle
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.pending = 0
        self.skipped = 0
        self.stopping = False
        self._notice = notice

    def submit(self, turn) -> None:
        if not turn.result.reply or turn.result.partial:
            return  # nothing to learn from: chat.ChatTurn.finish does nothing for these
        with self._lock:
            if self.stopping:
                self.skipped += 1
                return
            self.pending += 1
        self._pool.submit(self._run, turn)

    def catch_up(self, vault, before) -> None:
        """Queue the learning owed to turns from before this server started (`Memvault.learn`: a
        server stopped before its upkeep, a reply cut short, an LLM that was down), each change logged."""
        with self._lock:
            self.pending += 1
        self._pool.submit(self._run, None, lambda: self._catch_up(vault, before))

    def _catch_up(self, vault, before) -> None:
        outcome = vault.learn(before=before)
        for line in term.change_lines(outcome.learned.to_json()):
            self._notice(f"memvault: {line}")
        if outcome.turns:
            self._notice(f"memvault serve: caught up learning from {outcome.done} of {len(outcome.turns)} turn(s) "
                         "never learned from")
        if outcome.error:
            self._notice(f"memvault: warning: {outcome.error}")

    def _run(self, turn, call: Callable[[], Any] | None = None) -> None:
        try:
            if self.stopping:
                with self._lock:
                    self.skipped += turn is not None
                return
            try:
                if call is not None:
                    call()
                else:
                    result = turn.finish()
                    if result.upkeep_error:
                        self._notice(f"memvault: warning: reply kept, but memory upkeep failed: {result.upkeep_error}")
            except Exception as exc:  # the turns are stored; say why learning failed and go on
                self._notice(f"memvault: warning: memory upkeep failed: {as_api_error(exc).message}")
            if self._when_idle is not None and self.pending == 1 and not self.stopping:
                # Nothing else queued: the files just written go into the index, and its new table
                # version into LanceDB's caches, now and not in the next request (its search, at
                # 10,000 memories: 38 -> 26 ms).
                with contextlib.suppress(Exception):  # the next request syncs and loads what it needs
                    self._when_idle()
        finally:
            with self._lock:
                self.pending -= 1
                self._idle.notify_all()

    def stop(self, timeout: float) -> int:
        """Start no more upkeep, give the running one `timeout` seconds; how many were not done."""
        with self._lock:
            self.stopping = True
            # The queued ones see `stopping` and skip at once, once the running one is done.
            self._idle.wait_for(lambda: self.pending == 0, timeout)
            return self.skipped + self.pending


class Workers:
    """Daemon threads for the exchanges, each call on a thread of its own (a reply may wait minutes
    for the model: no call waits for another), kept for later calls: ONNX Runtime's first inference
    in a new thread costs ~5 ms more (a query embedded in a fresh thread: 8.3 ms against 3.5), which
    a thread per request paid every time. As many threads stay as calls were once at the same time."""

    def __init__(self):
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a call that no call has claimed yet

    def run(self, call: Callable[[], None]) -> None:
        with self._lock:
            claimed = self._idle > 0
            self._idle -= claimed
        if not claimed:
            threading.Thread(target=self._work, name="memvault-chat", daemon=True).start()
        self._calls.put(call)

    def _work(self) -> None:
        while True:
            self._calls.get()()  # each call handles its own errors (in_thread, stream)
            with self._lock:
                self._idle += 1


class Proxy:
    """The server's state: the vault, the exchanges and upkeep under way, the upstream's model list."""

    def __init__(self, vault, options: ServeOptions, notice: Callable[[str], None]):
        self.vault, self.options, self.notice = vault, options, notice
        self.turns = Turns()
        self.storing = Storing()
        self.upkeep = Upkeep(notice, when_idle=vault.warm)
        self.workers = Workers()
        self._models: tuple[float, set[str]] = (0.0, set())
        provider, sep, name = vault.settings.llm_model.partition("/")
        self._provider, self.configured_model = (provider + "/", name) if sep else ("", provider)
        self.stop_requested: float | None = None  # when SIGTERM or SIGINT came

    def ending(self) -> bool:
        """Whether the server has been stopping for long enough that requests still waiting for the
        model must end now, before uvicorn's graceful period is over (it would cancel them)."""
        return self.stop_requested is not None and time.monotonic() - self.stop_requested >= GRACE_REQUESTS - 1

    async def wait(self, future: "asyncio.Future"):
        """The future's result; ApiError 503 once the server is ending (the work goes on in its thread)."""
        try:
            while True:
                try:
                    return await asyncio.wait_for(asyncio.shield(future), 0.25)
                except asyncio.TimeoutError:
                    if self.ending():
                        raise ApiError(503, "memvault serve is stopping; the message is stored, with the reply "
                                            "so far", kind="server_error", code="stopping") from None
        finally:
            future.cancel()  # a no-op once it is done

    def in_thread(self, fn: Callable[[Callable[[Any], None]], Any]) -> "asyncio.Future":
        """fn(answer) on a worker thread of its own (Workers), as a future of the running loop: its
        result, or what it passed to answer() before it was done (it goes on then). Not the loop's
        default executor: a stop does not wait for a thread that waits for the model."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(how: str, value: Any) -> None:
            def set_it():
                if not future.done():
                    getattr(future, how)(value)
            with contextlib.suppress(RuntimeError):  # the loop is gone: the server stopped
                loop.call_soon_threadsafe(set_it)

        def work() -> None:
            try:
                result = fn(lambda value: settle("set_result", value))
            except BaseException as exc:  # noqa: BLE001 (handed to the request)
                settle("set_exception", exc)
            else:
                settle("set_result", result)

        self.workers.run(work)
        return future

    # -- the model ----------------------------------------------------------------------------
    async def model_for(self, requested: str | None) -> tuple[str | None, str]:
        """(litellm model string or None for llm_model, the name the response gives): the model the
        client names when the upstream serves it, else the configured one."""
        if not requested or requested in (self.configured_model, self.vault.settings.llm_model):
            return None, self.configured_model
        fetched, served = self._models
        if time.monotonic() - fetched > MODELS_TTL:
            try:
                listed = await anyio.to_thread.run_sync(self.vault.llm_models)
                served = {m["id"] for m in listed}
            except MemvaultError:
                served = set()  # the chat itself will say what is wrong with the upstream
            self._models = (time.monotonic(), served)
        if requested in served:
            return self._provider + requested, requested
        return None, self.configured_model

    # -- chat ---------------------------------------------------------------------------------
    def _start(self, call: ChatCall, model: str | None, stream: bool):
        # The conversation's last exchange stored and indexed first (a store waits at most lock_timeout).
        self.storing.wait(call.conversation, self.vault.settings.lock_timeout + GRACE_LOCK)
        return self.turns.start(lambda: self.vault.chat(
            call.text, conversation=call.conversation, stream=stream, model=model, history=call.history,
            user_message=call.message, llm_options=call.options, upstream_objects=True, after_user=call.after,
            resent=call.resent))

    async def complete(self, call: ChatCall, model: str | None, name: str) -> Response:
        sent = threading.Event()

        def run(answer: Callable[[Any], None]):
            turn = self._start(call, model, stream=False)

            response = []  # the upstream's one answer (iterating the turn gives it)

            def on_reply(reply: str) -> None:  # respond now; the turns are stored once it is out
                answer((turn, response[0]))
                sent.wait(SEND_WAIT)

            turn.on_reply = on_reply
            self._finish(turn, lambda: response.extend(turn))  # read to the end
            return turn, response[0]

        turn, response = await self.wait(self.in_thread(run))
        # The upstream's answer as it is (tool calls, usage, log-probabilities), under our id and the model's name.
        body = {**response, "id": f"chatcmpl-{turn.result.user_turn.id}", "object": "chat.completion",
                "created": int(time.time()), "model": name}
        # Starlette runs a response's background task once its body is sent.
        return _json(body, headers=self._headers(call, turn), background=BackgroundTask(sent.set))

    def _finish(self, turn, read: Callable[[], Any]) -> None:
        """Read the reply to its end (the turns are stored there), then queue the upkeep. A failure
        after the client has its reply (the turns could not be stored) is said on stderr."""
        answered = []
        reply_callback = turn.on_reply
        conversation = turn.options.conversation

        def on_reply(reply: str) -> None:
            # Before the client has it: its next message waits for the store.
            answered.append(self.storing.begin(conversation))
            reply_callback(reply)

        turn.on_reply = on_reply
        try:
            read()
        except BaseException as exc:
            if not answered:
                raise
            self.notice(f"memvault: warning: a reply was sent but not stored: {as_api_error(exc).message}")
            return
        finally:
            if answered:
                self.storing.end(conversation, answered[0])
            self.turns.done(turn)
        self.upkeep.submit(turn)

    async def stream(self, call: ChatCall, model: str | None, name: str) -> Response:
        loop = asyncio.get_running_loop()
        pieces_in: asyncio.Queue = asyncio.Queue()
        cancel = threading.Event()
        sent = threading.Event()  # the last event is out (or the response ended otherwise)

        def put(kind: str, value: Any = None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: the server stopped
                loop.call_soon_threadsafe(pieces_in.put_nowait, (kind, value))

        def read() -> None:
            # One thread reads the reply from the model and hands on each piece as it comes.
            try:
                turn = self._start(call, model, stream=True)
            except BaseException as exc:
                put("error", exc)
                return
            put("turn", turn)

            def on_reply(reply: str) -> None:  # the response ends now; the turns are stored once it is out
                put("end")
                sent.wait(SEND_WAIT)

            turn.on_reply = on_reply

            def pieces() -> None:
                for piece in turn:
                    put("piece", piece)
                    if cancel.is_set():  # the client hung up: keep what arrived, marked partial
                        turn.close()
                        break

            try:
                self._finish(turn, pieces)
            except BaseException as exc:  # an LLMError: the user's turn is stored, unanswered
                put("error", exc)

        self.workers.run(read)

        async def next_item() -> tuple[str, Any]:
            return await self.wait(asyncio.ensure_future(pieces_in.get()))

        try:
            kind, turn = await next_item()
            if kind == "error":
                raise turn
            first = await next_item()  # the model has begun (or failed: then a proper error status)
        except BaseException:
            cancel.set()
            raise
        if first[0] == "error":
            raise first[1]
        chunk_id, created = f"chatcmpl-{turn.result.user_turn.id}", int(time.time())

        def event(chunk: dict) -> bytes:
            # The upstream's chunk as it is (content, tool-call deltas, usage), under our id and the model's name.
            data = {**chunk, "id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": name}
            return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

        async def events():
            try:
                kind, value = first
                while kind == "piece":
                    yield event(value)
                    try:
                        kind, value = await next_item()
                    except ApiError as stopping:
                        kind, value = "error", stopping
                if kind == "error":  # after the headers: OpenAI's way, an error event, and the end
                    cancel.set()
                    failure = as_api_error(value)
                    body = error_body(failure.message, failure.kind, failure.param, failure.code)
                    yield f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()
                    return
                yield b"data: [DONE]\n\n"
            except BaseException:  # the client hung up (cancelled), or the server is stopping
                cancel.set()
                raise
            finally:
                sent.set()

        return StreamingResponse(events(), media_type="text/event-stream", headers={
            **self._headers(call, turn), "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @staticmethod
    def _headers(call: ChatCall, turn) -> dict[str, str]:
        headers = {"X-Memvault-Conversation": call.conversation.encode("utf-8").decode("latin-1"),
                   "X-Memvault-User-Turn": turn.result.user_turn.id,
                   "X-Memvault-Memories": str(len(turn.result.memories))}
        return headers

    # -- stopping -------------------------------------------------------------------------------
    def stop(self) -> str:
        """After the HTTP server stopped: let the running upkeep finish (a few seconds), store the
        replies still waiting for the model, and take the vault lock so that no thread of this
        process is half way through a write when it leaves. Returns what to tell the user."""
        under_way = self.turns.stop(GRACE_UPKEEP)
        not_done = self.upkeep.stop(GRACE_UPKEEP)
        waiting = 0
        for turn in under_way:  # a store under way in its own thread is waited for, not repeated
            try:
                waiting += turn.abandon()
            except MemvaultError as exc:
                self.notice(f"memvault: warning: {exc}")
        stack = contextlib.ExitStack()
        try:  # held until the process is gone (the kernel releases it): no thread of ours is mid-write
            stack.enter_context(self.vault.hold_lock(GRACE_LOCK, "serve (stopping)"))
        except (MemvaultError, OSError):
            pass
        said = "memvault serve: stopped"
        if waiting:
            said += f"; {waiting} reply(ies) still waiting for the model stored as they were (partial)"
        if not_done:
            said += f"; the memory upkeep of {not_done} turn(s) was not done (their turns are stored)"
        return said


# -- the application ------------------------------------------------------------------------------

def build_app(vault, options: ServeOptions, notice: Callable[[str], None]) -> tuple[Any, Proxy]:
    """The ASGI application serving one open vault (a `Memvault`, ideally opened with watch=True),
    and its state."""
    proxy = Proxy(vault, options, notice)
    app = FastAPI(title="memvault", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(ApiError)
    async def _api_error(request, exc: ApiError):
        return _refusal(exc)

    @app.exception_handler(MemvaultError)
    async def _library_error(request, exc: MemvaultError):
        return _refusal(as_api_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, exc: StarletteHTTPException):
        if exc.status_code == 404:
            return _refusal(ApiError(404, f"no route {request.method} {request.url.path} (memvault serve has "
                                          "/v1/chat/completions, /v1/models, /v1/memories, /v1/stats, /health)",
                                     kind="not_found_error", code="unknown_route"))
        refusal = _refusal(ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}",
                                    code="method_not_allowed" if exc.status_code == 405 else None))
        refusal.headers.update(exc.headers or {})  # 405: Allow, the methods the route takes
        return refusal

    @app.exception_handler(Exception)
    async def _unexpected(request, exc: Exception):
        failure = as_api_error(exc)
        if failure.status == 500 and not isinstance(exc, (MemvaultError, OSError)):
            import traceback

            notice("memvault: " + "".join(traceback.format_exception(exc)).rstrip())
        return _refusal(failure)

    async def blocking(fn, *args, **kwargs):
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    @app.get("/health")
    async def health():
        return _json({"status": "ok", "version": __version__, "replies_in_flight": proxy.turns.count(),
                      "upkeep_pending": proxy.upkeep.pending,
                      # read-your-writes: requests that waited for their conversation's last store, and how long
                      "waited_for_stores": proxy.storing.waits, "store_wait_ms": round(proxy.storing.waited * 1000, 1)})

    @app.get("/v1/stats")
    async def stats():
        return _json(await blocking(vault.stats))  # what `memvault stats --json` prints

    @app.get("/v1/models")
    async def models():
        listed = await blocking(vault.llm_models)
        return _json({"object": "list", "data": listed})

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        # What client.models.retrieve() asks: the configured model, or one the upstream serves.
        listed = {m["id"]: m for m in await blocking(vault.llm_models)}
        if model_id in listed or model_id == proxy.configured_model:
            return _json({"object": "model", "created": 0, "owned_by": "memvault",
                          **listed.get(model_id, {}), "id": model_id})
        raise ApiError(404, f"no model {model_id!r}: the upstream serves {', '.join(sorted(listed)) or 'none'} and "
                            f"llm_model is {proxy.configured_model!r}", "model", kind="not_found_error",
                       code="model_not_found")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        call = parse_chat(await json_object(request), request.headers, options.conversation)
        model, name = await proxy.model_for(call.model)
        if call.stream:
            return await proxy.stream(call, model, name)
        return await proxy.complete(call, model, name)

    @app.post("/v1/memories")
    async def add(request: Request):
        body: AddBody = checked(AddBody, await json_object(request))
        conversation = body.conversation_id or options.conversation
        if body.extract:
            vault.check_extract(body.kind, tags=body.tags, source=body.source, rationale=body.rationale,
                                alternatives=body.alternatives, allow_duplicate=body.allow_duplicate)
            learned = await blocking(vault.add_extracted, body.text, conversation=conversation,
                                     each_line=body.each_line)
            return _json(learned.to_json())
        added = await blocking(vault.add, body.text, conversation=conversation, kind=body.kind, tags=body.tags,
                               source=body.source, rationale=body.rationale, alternatives=body.alternatives,
                               each_line=body.each_line, allow_duplicate=body.allow_duplicate)
        return _json(added.to_json(vault.root))

    @app.post("/v1/memories/search")
    async def search(request: Request):
        body: SearchBody = checked(SearchBody, await json_object(request))
        if body.all_conversations and body.conversation_id:
            raise ApiError(400, "conversation_id and all_conversations do not go together", "all_conversations")
        outcome = await blocking(
            vault.search, body.query, top_k=body.top_k, conversation=body.conversation_id or options.conversation,
            all_conversations=body.all_conversations, kinds=body.kinds or None, tags=body.tags, since=body.since,
            until=body.until, now=body.now, as_of=body.as_of, rerank=body.rerank, recency_weight=body.recency_weight,
            mmr_lambda=body.mmr_lambda, threshold=body.threshold, retriever=body.retriever,
            relevance_floor=body.relevance_floor, session_weight=body.session_weight)
        return _json(outcome.to_json())

    @app.get("/v1/memories")
    async def listing(request: Request):
        asked = {name: (request.query_params.getlist(name) if name in ListQuery.LISTS else value)
                 for name, value in request.query_params.items()}
        query: ListQuery = checked(ListQuery, asked)
        page = await blocking(vault.recent, query.conversation_id, limit=query.limit, kinds=query.kinds or None,
                              tags=query.tags, since=query.since, until=query.until, deleted=query.deleted,
                              as_of=query.as_of, cursor=query.cursor)
        return _json({"object": "list", "data": [m.to_json(vault.root) for m in page],
                      "has_more": page.next_cursor is not None, "next_cursor": page.next_cursor})

    @app.get("/v1/memories/search")
    async def search_by_get():
        raise ApiError(405, "search is POST /v1/memories/search with a JSON body ({\"query\": ...}); "
                            "GET /v1/memories lists the newest", code="method_not_allowed")

    @app.get("/v1/memories/review")
    async def review_list(conversation_id: str | None = None, limit: int | None = None):
        items = await blocking(vault.review, conversation_id, limit=limit)
        return _json([item.to_json(vault.root) for item in items])

    @app.post("/v1/memories/review")
    async def review(request: Request):
        body: ReviewBody = checked(ReviewBody, await json_object(request))
        if bool(body.keep) == bool(body.reject):
            raise ApiError(400, "give the ids of learned facts to keep or to reject (one of the two)", "keep")
        if body.text is not None and not body.keep:
            raise ApiError(400, "text goes with keep", "text")
        if body.reason is not None and not body.reject:
            raise ApiError(400, "reason goes with reject", "reason")
        if body.keep:
            outcome = await blocking(vault.review_keep, body.keep, text=body.text)
        else:
            outcome = await blocking(vault.review_reject, body.reject, reason=body.reason)
        return _json(outcome.to_json())

    @app.get("/v1/memories/{memory_id}")
    async def get(memory_id: str, as_of: str | None = None):
        memory = await blocking(vault.get, memory_id, as_of=as_of)
        return _json(memory.to_json(vault.root))

    @app.delete("/v1/memories/{memory_id}")
    async def remove(memory_id: str, reason: str | None = None):
        removed = await blocking(vault.remove, [memory_id], reason=reason)
        return _json([m.to_json(vault.root) for m in removed])

    return Guard(app, options.max_body, options.api_key), proxy


# -- running it -----------------------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, api_key: str | None) -> None:
    if not is_loopback(host) and not api_key:
        raise UsageError(f"refusing to serve your memories on {host}, an address other machines can reach, "
                         "without a key: set MEMVAULT_SERVE_API_KEY (clients then send `Authorization: Bearer "
                         "<key>`), or bind 127.0.0.1")


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the models load, so that a port in use is said at once."""
    try:
        family, kind, proto, _, _ = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections of such a socket, and
        # without it every response (headers and body: two writes) waited 40 ms for a delayed ACK.
        sock = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        raise MemvaultError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, with memvault's signal handling: the stop signals (signals.py: SIGTERM, SIGHUP,
    SIGINT even when the process started with it ignored, as `cmd &` in a script does) all stop it;
    and after the stop the process leaves with exit code 0 (uvicorn raises the signal again, which
    with SIGTERM's default action would end it with -15)."""

    def __init__(self, config: uvicorn.Config, proxy: Proxy):
        super().__init__(config)
        self.proxy = proxy

    @contextlib.contextmanager
    def capture_signals(self):
        yield  # run() installed handle_exit already (uvicorn's own would restore and re-raise)

    def handle_exit(self, sig, frame) -> None:
        if self.should_exit:
            self.force_exit = True  # a second signal: stop waiting for connections
        self.should_exit = True
        if self.proxy.stop_requested is None:
            self.proxy.stop_requested = time.monotonic()


def log_config(access_log: bool) -> dict:
    """uvicorn's records on stderr (stdout carries nothing), its own chatter only from warnings up."""
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "memvault serve: %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}},
        "loggers": {"uvicorn": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
                    "uvicorn.error": {"level": "WARNING"},
                    "uvicorn.access": {"handlers": ["stderr"], "level": "INFO" if access_log else "WARNING",
                                       "propagate": False}},
    }


def run(vault, options: ServeOptions, notice: Callable[[str], None]) -> None:
    """Serve until a stop signal (signals.py), then stop cleanly and leave the process with exit code 0.
    The caller installs signals.stop_on_signals() first: a signal during the warm-up then raises
    signals.Stopped once the step under way is done (at once in a wait for the vault lock), and no
    request is served."""
    check_bind(options.host, options.api_key)
    started = files.utcnow()  # turns from before this moment that were never learned from are caught up
    # A request's threads (the event loop, the exchange's, the reply's store) hand the GIL to
    # each other many times; at Python's 5 ms switch interval a hand-off can wait that long.
    sys.setswitchinterval(SWITCH_INTERVAL)
    sock = listen(options.host, options.port)
    for warm_up in (vault.warm, vault.warm_llm):  # a stop signal meanwhile: the step under way ends, then Stopped
        if signals.requested.is_set():
            raise signals.Stopped()
        try:
            # The models, the index and its caches; litellm, which takes seconds to import: now, not
            # during the first request, nor in two request threads at once.
            warm_up()
        except Exception as exc:  # the requests that need them will say what is wrong, one line each
            notice(f"memvault: warm-up failed: {' '.join(str(exc).split())[:300]}")
    app, proxy = build_app(vault, options, notice)
    proxy.upkeep.catch_up(vault, started)  # what earlier runs left unlearned, before any new turn's upkeep
    config = uvicorn.Config(app, log_config=log_config(options.access_log), access_log=options.access_log,
                            lifespan="off", timeout_graceful_shutdown=GRACE_REQUESTS, timeout_keep_alive=5,
                            server_header=False)
    server = _Server(config, proxy)
    signals.stop_on_signals(server.handle_exit)  # uvicorn's way from here; a signal that came before: no serving
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    settings = vault.settings
    if not signals.requested.is_set():
        notice(f"memvault serve: listening on http://{shown}:{port}/v1 (vault {vault.root}; "
               f"model {settings.llm_model} at {vault.llm_endpoint()})")
        server.run(sockets=[sock])
    said = proxy.stop()
    vault.close()
    notice(said)
    sys.stderr.flush()
    # Threads may still wait for the model (their replies are stored); the native libraries' teardown
    # (ONNX Runtime, LanceDB) can take seconds: leave at once, the vault lock released by the kernel.
    os._exit(0)
