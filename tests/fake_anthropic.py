"""A scripted Anthropic Messages API server for tests (real sockets, a real HTTP/1.1 server).

The Anthropic-speaking twin of tests/fake_llm.py (the server, script and records they share:
tests/fake_server.py): the upstream a real client (the `claude` CLI, the `anthropic` SDK, litellm's
anthropic provider, `memvault serve`'s Anthropic face) talks to. Its
``base_url`` is the server's root (``http://127.0.0.1:PORT``), as ``ANTHROPIC_BASE_URL`` takes it:
clients add ``/v1/messages`` themselves (the `claude` CLI adds ``?beta=true``, which is accepted).

Routes: ``POST /v1/messages`` (scripted, streamed or not as the body's ``stream`` asks),
``POST /v1/messages/count_tokens`` (answered, never scripted: ``{"input_tokens": <about a quarter of the
body's JSON length>}``), ``GET /v1/models`` and ``GET /v1/models/{id}`` (from ``fake.models``).

Each test scripts the replies it expects with ``fake_anthropic.push(...)``; a script item is
- a string: the assistant's text (streamed as several ``text_delta`` events when ``stream: true``);
- a callable: called with the request's parsed body, returns a script item (a reply that depends on
  what was asked, e.g. an agent whose number of requests the test cannot know);
- a dict, whose keys combine:
    ``{"delay": 5}``                 sleep first (for timeouts), then answer the rest of the item, or the
                                     default text "ok" when nothing else is given;
    ``{"status": 529, "body": ...}`` answer with that HTTP status; body is a str sent verbatim or a dict
                                     sent as JSON (default: Anthropic's error shape, its type for the status:
                                     400 invalid_request_error, 401 authentication_error, 404 not_found_error,
                                     429 rate_limit_error, 500 api_error, 529 overloaded_error, ...);
    ``{"raw": "not json"}``          HTTP 200 with this exact body (garbage for the client);
    ``{"text": "..."}``              the assistant's text, as for a plain string (``content`` is a synonym);
    ``{"chunks": ["a", "b"]}``       stream exactly these text pieces;
    ``{"chunk_delay": 0.5}``         with a stream, wait this long before each piece (a slow reply);
    ``{"hold": threading.Event()}``  with a stream, send the pieces, then end the reply only once the test
                                     sets the event (a reply that is still streaming);
    ``{"thinking": "..."}``          a thinking block before the text (``thinking_delta`` then
                                     ``signature_delta`` when streamed);
    ``{"tool_use": [{"name": "f", "input": {...}}]}``  the assistant calls these tools after its text (no
                                     text unless given; stop_reason "tool_use"; ids ``toolu_fake_<n>``
                                     unless an ``id`` is given); streamed as ``input_json_delta``s, the
                                     input's JSON in two pieces;
    ``{"stop_reason": "max_tokens"}`` the stop reason (default end_turn, or tool_use with tools);
    ``{"cut": True}``                with a stream, the connection closes after the text pieces, mid-reply
                                     (half an event, no message_stop): an upstream that died while answering;
    ``{"error_event": {"type": "overloaded_error", "message": "..."}}``  with a stream, the pieces, then
                                     Anthropic's ``event: error`` instead of the end (an upstream that gave up);
    ``{"usage": {...}}``             the usage reported (default 10 input + 5 output tokens).

Empty queue: by default the server fails loudly. It answers HTTP 500 (api_error) with a message
saying "fake_anthropic: no scripted reply left", and the fixture's teardown fails the test. Set
``fake_anthropic.default`` (any script item, a callable too) to answer unscripted requests instead.

Recorded, in order: ``fake.requests`` the parsed JSON body of every ``/v1/messages`` request,
``fake.headers`` their HTTP headers (email.message.Message: any case), ``fake.paths`` their paths with
the query (``/v1/messages?beta=true``), ``fake.count_requests`` the bodies sent to count_tokens.
``request_text(body)`` gives all the text a request carries (system, messages, text blocks, tool
results), to assert what reached the model.
"""

from __future__ import annotations

import itertools
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from fake_server import ScriptedHandler, ScriptedServer, serving, split

__all__ = ["FakeAnthropic", "fake_anthropic", "request_text"]

EMPTY_QUEUE_MESSAGE = "fake_anthropic: no scripted reply left"
USAGE = {"input_tokens": 10, "output_tokens": 5}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
               504: "timeout_error", 529: "overloaded_error"}


def error_body(status: int, message: str = "fake_anthropic scripted error") -> dict:
    """Anthropic's error shape for an HTTP status."""
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
            "request_id": "req_fake"}


def request_text(body: dict) -> str:
    """Every piece of text a Messages request carries, one per line: the system prompt (a string or
    blocks), each message's content (a string, or its text blocks and tool results' text)."""
    out: list[str] = []

    def take(content: Any) -> None:
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    if isinstance(block.get("text"), str):
                        out.append(block["text"])
                    elif block.get("type") == "tool_result":
                        take(block.get("content"))

    take(body.get("system"))
    for message in body.get("messages") or []:
        take(message.get("content"))
    return "\n".join(out)


class FakeAnthropic(ScriptedServer):
    name = "fake_anthropic"

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.paths: list[str] = []
        self.count_requests: list[dict] = []
        self.models = ["claude-test-1"]
        super().__init__()

    def unscripted_reply(self) -> dict:
        return {"status": 500, "body": error_body(500, EMPTY_QUEUE_MESSAGE)}

    def texts(self) -> list[str]:
        """request_text of every recorded /v1/messages request, in order."""
        return [request_text(body) for body in self.requests]

    def _message(self, body: dict, item: dict) -> tuple[dict, list[dict]]:
        """The response message (content filled) and its content blocks."""
        blocks: list[dict] = []
        if item.get("thinking"):
            blocks.append({"type": "thinking", "thinking": item["thinking"], "signature": "sig_fake"})
        calls = item.get("tool_use") or []
        text = item.get("text", item.get("content"))
        if text is None:
            text = "".join(item.get("chunks", [])) or ("" if calls else "ok")
        if text or item.get("chunks"):
            blocks.append({"type": "text", "text": text})
        for number, call in enumerate(calls):
            blocks.append({"type": "tool_use", "id": call.get("id", f"toolu_fake_{number}"), "name": call["name"],
                           "input": call.get("input", {})})
        message = {"id": f"msg_fake_{next(self._ids)}", "type": "message", "role": "assistant",
                   "model": body.get("model", self.models[0]), "content": blocks,
                   "stop_reason": item.get("stop_reason", "tool_use" if calls else "end_turn"),
                   "stop_sequence": None, "usage": item.get("usage") or dict(USAGE)}
        return message, blocks

    class Handler(ScriptedHandler):
        answer_headers = {"request-id": "req_fake"}

        def do_GET(self) -> None:
            fake = self.fake
            path = urlsplit(self.path).path.rstrip("/")
            models = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                      for m in fake.models]
            if path == "/v1/models":
                self._send(200, {"data": models, "has_more": False, "first_id": fake.models[0],
                                 "last_id": fake.models[-1]})
            elif path.startswith("/v1/models/") and path.rsplit("/", 1)[1] in fake.models:
                self._send(200, next(m for m in models if m["id"] == path.rsplit("/", 1)[1]))
            else:
                self._send(404, error_body(404, f"no route {self.path}"))

        def do_POST(self) -> None:
            fake = self.fake
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path = urlsplit(self.path).path.rstrip("/")
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, error_body(400, "fake_anthropic: the body is not JSON"))
                return
            if path == "/v1/messages/count_tokens":
                fake.count_requests.append(body)
                self._send(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
                return
            if path != "/v1/messages":
                self._send(404, error_body(404, f"no route {self.path}"))
                return
            fake.headers.append(self.headers)
            fake.paths.append(self.path)
            fake.requests.append(body)
            item = fake.next_item(body)
            try:
                self._answer(body, {"text": item} if isinstance(item, str) else item)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def _answer(self, body: dict, item: dict) -> None:
            fake = self.fake
            if "delay" in item and fake.closing_within(item["delay"]):
                return
            if "status" in item:
                self._send(item["status"], item.get("body", error_body(item["status"])))
            elif "raw" in item:
                self._send(200, item["raw"])
            elif body.get("stream"):
                self._stream(body, item)
            else:
                self._send(200, fake._message(body, item)[0])

        def _event(self, payload: dict) -> None:
            self.wfile.write(f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        def _stream(self, body: dict, item: dict) -> None:
            fake = self.fake
            message, blocks = fake._message(body, item)
            usage = message["usage"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            start = dict(message, content=[], stop_reason=None,
                         usage={"input_tokens": usage.get("input_tokens", 0), "output_tokens": 1})
            self._event({"type": "message_start", "message": start})
            self._event({"type": "ping"})
            delay, hold = item.get("chunk_delay", 0), item.get("hold")
            for index, block in enumerate(blocks):
                if block["type"] == "text":
                    self._event({"type": "content_block_start", "index": index,
                                 "content_block": {"type": "text", "text": ""}})
                    for piece in item.get("chunks") or split(block["text"]):
                        if delay and fake.closing_within(delay):
                            return
                        self._event({"type": "content_block_delta", "index": index,
                                     "delta": {"type": "text_delta", "text": piece}})
                    if item.get("cut"):  # half an event, then the connection gone
                        self.wfile.write(b'event: content_block_delta\ndata: {"type": "content_bl')
                        self.wfile.flush()
                        return
                    if item.get("error_event"):
                        self._event({"type": "error", "error": item["error_event"]})
                        return
                elif block["type"] == "thinking":
                    self._event({"type": "content_block_start", "index": index,
                                 "content_block": {"type": "thinking", "thinking": ""}})
                    for piece in split(block["thinking"]):
                        self._event({"type": "content_block_delta", "index": index,
                                     "delta": {"type": "thinking_delta", "thinking": piece}})
                    self._event({"type": "content_block_delta", "index": index,
                                 "delta": {"type": "signature_delta", "signature": block["signature"]}})
                else:  # tool_use: the input's JSON in two pieces
                    self._event({"type": "content_block_start", "index": index, "content_block": {
                        "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
                    arguments = json.dumps(block["input"])
                    half = len(arguments) // 2
                    for piece in (arguments[:half], arguments[half:]):
                        self._event({"type": "content_block_delta", "index": index,
                                     "delta": {"type": "input_json_delta", "partial_json": piece}})
                self._event({"type": "content_block_stop", "index": index})
            if hold is not None and not fake.released(hold):
                return
            self._event({"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                            "stop_sequence": None},
                         "usage": {"output_tokens": usage.get("output_tokens", 0)}})
            self._event({"type": "message_stop"})



@pytest.fixture
def fake_anthropic():
    yield from serving(FakeAnthropic())
