"""What the scripted upstreams of the tests share (tests/fake_llm.py speaks OpenAI's protocol,
tests/fake_anthropic.py Anthropic's): a real HTTP/1.1 server on a free loopback port, in a thread of its
own; the test's script, a queue of replies taken one per request (an item may be a callable of the
request's body that gives one); the default answer for a request the script has none for, else an error
counted in `unscripted`, which the fixture's teardown fails the test on; the records of what came; and a
stop that wakes every handler still waiting on a delay or a hold. Each fake keeps only its protocol:
its routes and the shape of its answers.
"""

from __future__ import annotations

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest


def split(text: str, pieces: int = 4) -> list[str]:
    """Cut text into up to `pieces` non-empty consecutive parts (at least 2 when possible)."""
    if len(text) < 2:
        return [text] if text else []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedHandler(BaseHTTPRequestHandler):
    """A fake's request handler: keep-alive HTTP/1.1, quiet, JSON answers (`send`); `fake` is the server's
    ScriptedServer (set by ScriptedServer._handler_class)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes; avoid a 40 ms stall
    fake: "ScriptedServer"
    answer_headers: dict[str, str] = {}  # sent with every JSON answer

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, payload: Any) -> None:
        encoded = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        for name, value in self.answer_headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(encoded)


class ScriptedServer:
    """A fake upstream. Subclasses give `name` (the thread's, the fixture's and the empty-queue message's),
    `Handler` (a ScriptedHandler subclass), `path` (what base_url adds to the server's root) and
    `unscripted_reply()` (the protocol's error for a request the script has no reply for)."""

    name = "fake"
    Handler: type[ScriptedHandler] = ScriptedHandler
    path = ""

    def __init__(self) -> None:
        self._script: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closing = threading.Event()
        self.requests: list[dict] = []  # the parsed JSON body of every scripted request
        self.headers: list = []  # their HTTP headers (email.message.Message: any case)
        self.unscripted = 0  # requests answered while the queue was empty and no default was set
        self.default: Any = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (self.Handler,), {"fake": self}))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name=self.name.replace("_", "-"),
                                        daemon=True)  # a short poll interval keeps each teardown fast
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}{self.path}"

    def push(self, *items: Any) -> None:
        for item in items:
            self._script.put(item)

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping on a "delay" or "hold" item
        self._server.shutdown()
        self._server.server_close()

    def unscripted_reply(self) -> dict:
        raise NotImplementedError

    def next_item(self, body: dict) -> Any:
        """The script's next reply (a callable item called with the request's body), else the default,
        else unscripted_reply(), counted."""
        try:
            item = self._script.get_nowait()
        except queue.Empty:
            if self.default is None:
                self.unscripted += 1
                return self.unscripted_reply()
            item = self.default
        return item(body) if callable(item) else item

    def closing_within(self, seconds: float) -> bool:
        """Wait up to `seconds` (a delay item); True when the server stops meanwhile (then answer nothing)."""
        return self._closing.wait(seconds)

    def released(self, hold: threading.Event) -> bool:
        """Wait until the test sets `hold`: True; False when the server stops first (answer nothing)."""
        while not hold.wait(0.05):
            if self._closing.is_set():
                return False
        return True


def serving(fake: ScriptedServer) -> Iterator[ScriptedServer]:
    """A fake's fixture body: the fake, stopped after the test, which fails when a request found no reply."""
    try:
        yield fake
    finally:
        fake.close()
    if fake.unscripted:
        pytest.fail(f"{fake.name} got {fake.unscripted} request(s) with no scripted reply; "
                    f"push() one per expected call or set {fake.name}.default")
