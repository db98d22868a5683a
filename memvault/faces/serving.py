"""What a server that answers chats with memory keeps track of, whatever protocol it speaks (serve's
OpenAI router today; another protocol's router the same way): the exchanges under way (`Turns`), the
stores its next request waits for (`Storing`, read-your-writes), the memory upkeep after each reply
(`Upkeep`, one at a time), the threads the exchanges run on (`Workers`), the responses that say what
the client got (`Handed`, `HandedStream`: chat.Delivery), and `Exchanges`, which holds them
(docs/design.md, "The library API and its faces": serve).

A router turns its protocol's request into a `ChatCall` (its `forward`: the request as it came, for the
upstream), and hands the upstream's answer on with `complete` (a `Handed`) or `stream` (a `HandedStream`,
a failure after the first event in its protocol's error event); routes_openai.py and routes_anthropic.py
are the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import anyio
from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from memvault.errors import MemvaultError, answer_for
from memvault.faces.http import ApiError
from memvault.store import upstream

MODELS_TTL = 60.0  # seconds the upstream's model list is trusted (clients send `model` on every request)
GRACE_REQUESTS = 3.0  # seconds in-flight requests get to finish after SIGTERM
GRACE_UPKEEP = 2.0  # then seconds the running upkeep gets
GRACE_LOCK = 30.0  # at most this long for a write of this process under way (they take a moment)


@dataclass
class ChatCall:
    """A chat request, checked: what a protocol's router hands `Exchanges.start`."""

    text: str  # the user's message's text: what retrieval uses and what is stored
    conversation: str
    stream: bool
    model: str | None  # the model the client named
    forward: Any  # store/upstream.Forward: the request as the client sent it, for the upstream
    resent: bool = False  # the client's retry of this message (x-stainless-retry-count >= 1)


def checked_messages(body: dict, roles: set[str]) -> list[dict]:
    """The request's `messages` as both chat protocols take them: a non-empty list of objects, each with a
    role of `roles` (the protocol's). What is wrong is the client's: ApiError 400 naming the field
    (`messages[2].role`)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list of {role, content} objects", "messages")
    for number, message in enumerate(messages):
        where = f"messages[{number}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where} must be an object with role and content", where)
        if message.get("role") not in roles:
            raise ApiError(400, f"{where}.role must be one of {', '.join(sorted(roles))} "
                                f"(got {json.dumps(message.get('role'))[:40]})", f"{where}.role")
    return messages


class Handed(Response):
    """A response that says what its client got (chat.Delivery): the whole reply once its body is sent,
    nothing when it could not be (the client gone, the server stopping). `pieces`: the reply's text."""

    def __init__(self, content: bytes, status: int, media_type: str, headers: dict, delivery, pieces: list[str]):
        super().__init__(content, status_code=status, media_type=media_type, headers=headers)
        self.delivery, self.pieces = delivery, pieces

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
            self.delivery.handed("".join(self.pieces))
            self.delivery.settle(True)
        finally:
            self.delivery.settle(False)  # not sent (a no-op once settled)


class HandedStream(StreamingResponse):
    """A stream whose events say what they hand on (`Delivery.handed`, by its generator); once it is over,
    however it ended (the client gone, the server stopping, never begun), the delivery is settled."""

    def __init__(self, content, delivery, **kwargs):
        super().__init__(content, **kwargs)
        self.delivery = delivery

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.delivery.settle(False)  # a no-op when the generator settled it (the whole stream out)


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

    def queue(self, call: Callable[[], Any]) -> None:
        """Queue a call of its own on the upkeep thread, before any turn's upkeep queued after it (the
        catch-up of learning owed from before the start: `LongLived.catch_up`)."""
        with self._lock:
            self.pending += 1
        self._pool.submit(self._run, None, call)

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
                self._notice(f"memvault: warning: memory upkeep failed: {answer_for(exc).message}")
            if self._when_idle is not None and self.pending == 1 and not self.stopping:
                # Nothing else queued: the index brought in step now, not in the next request. Only that:
                # a whole search here (warm) cost 90 ms of CPU after every chat at 10,000 memories and
                # the next request's search was no faster for it (bench/README.md, issue 41).
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


class Exchanges:
    """The chats under way of a server that answers chats with memory (whatever protocol: a router
    module turns its requests into ChatCalls and the turns' answers into its shapes), their upkeep, and
    the upstream's model list. `start` a ChatCall's exchange (retrieval, the user's turn); read it in
    `in_thread` or on `workers` through `finish` (the turns stored, the upkeep queued); `wait` for a
    future, refused once the server is ending; `stop` when the HTTP server has stopped."""

    def __init__(self, vault, options, notice: Callable[[str], None]):
        self.vault, self.options, self.notice = vault, options, notice
        self.turns = Turns()
        self.storing = Storing()
        self.upkeep = Upkeep(notice, when_idle=vault.catch_up)
        self.workers = Workers()
        self._models: tuple[float, set[str]] = (0.0, set())
        provider, sep, name = vault.settings.llm_model.partition("/")
        self.configured_model = name if sep else provider  # llm_model without litellm's provider prefix
        self.stop_requested: float | None = None  # when SIGTERM or SIGINT came
        self.life = None  # lifecycle.LongLived: its stop takes the vault lock

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
    async def model_for(self, requested: str | None) -> str:
        """The model name the upstream gets: the one the client names when the upstream serves it (or
        when it is the configured one), else the configured one (llm_model without its litellm
        provider prefix)."""
        if not requested or requested in (self.configured_model, self.vault.settings.llm_model):
            return self.configured_model
        fetched, served = self._models
        if time.monotonic() - fetched > MODELS_TTL:
            try:
                listed = await anyio.to_thread.run_sync(self.vault.llm_models)
                served = {m["id"] for m in listed}
            except MemvaultError:
                served = set()  # the chat itself will say what is wrong with the upstream
            self._models = (time.monotonic(), served)
        return requested if requested in served else self.configured_model

    # -- chat ---------------------------------------------------------------------------------
    def start(self, call: ChatCall):
        """The exchange of a ChatCall: its conversation's last exchange stored and indexed first (a
        store waits at most lock_timeout), then retrieval and the user's turn (Memvault.chat). The
        turn's `delivery` is the router's to fill in."""
        self.storing.wait(call.conversation, self.vault.settings.lock_timeout + GRACE_LOCK)
        turn = self.turns.start(lambda: self.vault.chat(
            call.text, conversation=call.conversation, stream=call.stream, forward=call.forward, resent=call.resent))
        turn.delivery = upstream.Delivery()
        return turn

    def finish(self, turn, read: Callable[[], Any]) -> None:
        """Read the reply to its end (the turns are stored there), then queue the upkeep. A failure
        after the client has its reply (the turns could not be stored) is said on stderr."""
        answered = []
        reply_callback = turn.on_reply
        conversation = turn.options.conversation

        def on_reply(reply: str) -> None:
            # Before the client has it: its next message waits for the store.
            answered.append(self.storing.begin(conversation))
            if reply_callback is not None:
                reply_callback(reply)

        turn.on_reply = on_reply
        # The next request of the conversation may read once the turns are indexed (the commit may follow).
        turn.on_indexed = lambda: answered and self.storing.end(conversation, answered[0])
        try:
            read()
        except BaseException as exc:
            if not answered:
                raise
            self.notice(f"memvault: warning: a reply was sent but not stored: {answer_for(exc).message}")
            return
        finally:
            if answered:
                self.storing.end(conversation, answered[0])
            self.turns.done(turn)
        self.upkeep.submit(turn)

    @staticmethod
    def headers(call: ChatCall, turn) -> dict[str, str]:
        headers = {"X-Memvault-Conversation": call.conversation.encode("utf-8").decode("latin-1"),
                   "X-Memvault-User-Turn": turn.result.user_turn.id,
                   "X-Memvault-Memories": str(len(turn.result.memories))}
        return headers

    # -- stopping -------------------------------------------------------------------------------
    def stop(self) -> str:
        """After the HTTP server stopped: let the running upkeep finish (a few seconds), store the
        replies still under way as far as their clients got them, and take the vault lock so that no
        thread of this process is half way through a write when it leaves. Returns what to tell the user."""
        under_way = self.turns.stop(GRACE_UPKEEP)
        not_done = self.upkeep.stop(GRACE_UPKEEP)
        stored: dict[str, int] = {}
        for turn in under_way:  # a store under way in its own thread is waited for, not repeated
            try:
                kind = turn.abandon()
            except MemvaultError as exc:
                self.notice(f"memvault: warning: {exc}")
                continue
            if kind is not None:
                stored[kind] = stored.get(kind, 0) + 1
        if self.life is not None:  # held until the process is gone: no thread of ours is mid-write
            self.life.hold_lock(GRACE_LOCK)
        said = "memvault serve: stopped"
        if stored.get("partial"):
            said += f"; {_count(stored['partial'], 'reply', 'replies')} cut short, stored as far as the client got it (partial)"
        if stored.get("undelivered") or stored.get("reply"):
            said += f"; {_count(stored.get('undelivered', 0) + stored.get('reply', 0), 'reply', 'replies')} " \
                    "stored whole"
        if stored.get("unanswered"):
            said += f"; {_count(stored['unanswered'], 'message', 'messages')} stored without a reply (unanswered)"
        if not_done:
            said += f"; the memory upkeep of {_count(not_done, 'turn', 'turns')} was not done (their turns are stored)"
        return said


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


# -- handing an answer on (every protocol's router) ---------------------------------------------------

async def complete(ex: Exchanges, call: ChatCall, request: Request) -> Response:
    """The upstream's one answer, handed on as it came once it is whole (`turn.delivery` told when it is out)."""
    def run(answer: Callable[[Any], None]):
        turn = ex.start(call)
        response = []  # the upstream's one answer (iterating the turn gives it)

        def on_reply(reply: str) -> None:  # respond now; the turns are stored once the client has it
            answer((turn, response[0]))

        turn.on_reply = on_reply
        ex.finish(turn, lambda: response.extend(turn))  # read to the end
        return turn, response[0]

    turn, answer = await ex.wait(ex.in_thread(run))
    if await request.is_disconnected():  # the client gave up waiting (its timeout): it never gets this one
        turn.delivery.settle(False)
    # The upstream's answer as it came (id, usage, tool calls, log-probabilities: its bytes), and the
    # delivery's word once it is sent.
    return Handed(answer.raw, answer.status, answer.content_type, {**answer.headers, **ex.headers(call, turn)},
                  turn.delivery, turn.received)


async def stream(ex: Exchanges, call: ChatCall, error_event: Callable[[BaseException, Any], bytes]) -> Response:
    """The upstream's stream handed on event by event as each comes (`turn.delivery` told what went out);
    a failure after the first event is the protocol's error event (`error_event(failure, vault root)`)."""
    loop = asyncio.get_running_loop()
    pieces_in: asyncio.Queue = asyncio.Queue()
    cancel = threading.Event()

    def put(kind: str, value: Any = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the server stopped
            loop.call_soon_threadsafe(pieces_in.put_nowait, (kind, value))

    def read() -> None:
        # One thread reads the reply from the model and hands on each event as it comes.
        try:
            turn = ex.start(call)
        except BaseException as exc:
            put("error", exc)
            return
        put("turn", turn)
        turn.on_reply = lambda reply: put("end")  # the upstream's stream is over; stored once the client has it

        def pieces() -> None:
            for piece in turn:
                put("piece", piece)
                if cancel.is_set():  # the client hung up: keep what it was sent, marked partial
                    turn.close()
                    break

        try:
            ex.finish(turn, pieces)
        except BaseException as exc:  # an LLMError: the user's turn is stored, unanswered
            put("error", exc)

    ex.workers.run(read)

    async def next_item() -> tuple[str, Any]:
        return await ex.wait(asyncio.ensure_future(pieces_in.get()))

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
    delivery = turn.delivery

    async def events():
        try:
            kind, value = first
            while kind == "piece":
                yield value.raw  # the upstream's event as it came
                delivery.handed(value.text)  # sent: the client has been handed it
                try:
                    kind, value = await next_item()
                except ApiError as stopping:
                    kind, value = "error", stopping
            if kind == "error":  # after the headers: the protocol's error event, and the end
                if not (isinstance(value, ApiError) and value.code == "stopping"):
                    cancel.set()  # (a server that stops stores the reply itself, as far as it was sent)
                delivery.settle(False)
                yield error_event(value, ex.vault.root)
                return
            delivery.settle(True)  # every event of the upstream's stream, its end among them, is out
        except BaseException:  # the client hung up (cancelled), or the server is stopping
            cancel.set()
            raise

    return HandedStream(events(), delivery, media_type="text/event-stream", headers={
        **turn.upstream_headers, **ex.headers(call, turn), "Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
