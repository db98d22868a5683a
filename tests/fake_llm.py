"""A scripted OpenAI-compatible HTTP server for tests (real sockets, real litellm; the server, script and
records it shares with tests/fake_anthropic.py: tests/fake_server.py).

Each test scripts the replies it expects with ``fake_llm.push(...)``; a script item is
- a string: the assistant's content (streamed as several SSE chunks when ``stream: true``);
- a dict, whose keys combine:
    ``{"delay": 5}``                 sleep first (for timeouts), then answer the rest of the item,
                                     or the default content "ok" when nothing else is given;
    ``{"status": 500, "body": ...}`` answer with that HTTP status; body is a str sent verbatim
                                     or a dict sent as JSON (default: an OpenAI-style error);
    ``{"raw": "not json"}``          HTTP 200 with this exact body (garbage for the client);
    ``{"content": "..."}``           the assistant's content, as for a plain string;
    ``{"chunks": ["a", "b"]}``       stream exactly these pieces;
    ``{"chunk_delay": 0.5}``         with a stream, wait this long before each piece (a slow reply);
    ``{"hold": threading.Event()}``  with a stream, send the pieces, then end the reply only once the
                                     test sets the event (a reply that is still streaming); without one,
                                     answer only once the test sets it (a slow upstream);
    ``{"tool_calls": [{"name": "f", "arguments": "{...}"}]}``  the assistant calls these tools (content
                                     none unless given; finish_reason "tool_calls"); streamed as
                                     tool-call deltas, the arguments in two pieces;
    ``{"cut": True}``                with a stream, the connection closes after the pieces, mid-reply
                                     (half a chunk, no end): an upstream that died while answering;
    ``{"after_done": 0.5}``          with a stream, wait this long after `[DONE]`, then send a comment
                                     event before closing (an upstream whose connection lingers);
    ``{"usage": {...}}``             the usage reported (default 1 prompt + 1 completion token); a
                                     stream sends it in a last chunk when stream_options.include_usage;

Empty queue: by default the server fails loudly. It answers HTTP 500 with a body saying
"fake_llm: no scripted reply left", and the fixture's teardown fails the test. That way an
LLM call the test did not script shows up even when the code under test swallows the
error (reconcile does). Set ``fake_llm.default = '{"facts": []}'`` (any script item) to
answer unscripted calls instead.

    ``{"usage": None}``              no usage at all (an upstream that reports none);
    ``{"think": "..."}``             the content starts with a <think> block of these words (a reasoning model).

Each completion has an id of its own (``chatcmpl-fake-<n>``, n counting the requests), as an upstream
gives one per request.

``fake_llm.requests`` holds the parsed JSON body of every chat completion request, and
``fake_llm.headers`` their HTTP headers; ``fake_llm.received`` records every request the server got,
any path or method, as (method, path, body bytes). ``fake_llm.models`` is the list `GET /models`
answers with (ids).
``refused_url()`` returns a ``/v1`` base URL on a closed local port (endpoint down).
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest

from fake_server import ScriptedHandler, ScriptedServer, serving, split
from memvault.store.llm import LLMConfig

__all__ = ["FakeLLM", "fake_llm", "refused_url"]

EMPTY_QUEUE_BODY = "fake_llm: no scripted reply left"


def refused_url() -> str:
    """A base URL nothing listens on: bind port 0, note it, close it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class FakeLLM(ScriptedServer):
    name = "fake_llm"
    path = "/v1"

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes]] = []  # every request: method, path, body
        self.models: list[str] = ["test-model"]
        super().__init__()

    def config(self, **overrides: Any) -> LLMConfig:
        values = {"model": "openai/test-model", "base_url": self.base_url, "api_key": None, "timeout": 10.0}
        values.update(overrides)
        return LLMConfig(**values)

    def unscripted_reply(self) -> dict:
        return {"status": 500, "body": {"error": {"message": EMPTY_QUEUE_BODY, "type": "fake_llm"}}}

    class Handler(ScriptedHandler):
        def do_GET(self) -> None:
            fake = self.fake
            fake.received.append(("GET", self.path, b""))
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.models]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            fake = self.fake
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            fake.received.append(("POST", self.path, raw))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            body = json.loads(raw or b"{}")
            fake.headers.append(self.headers)  # case-insensitive: HTTP/2-era clients send lowercase names
            fake.requests.append(body)
            item = fake.next_item(body)
            body = {**body, "_id": f"chatcmpl-fake-{len(fake.requests)}"}
            try:
                self._answer(body, item)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test); nothing to answer

        def _answer(self, body: dict, item: Any) -> None:
            fake = self.fake
            if isinstance(item, str):
                item = {"content": item}
            if "delay" in item and fake.closing_within(item["delay"]):
                return
            if "status" in item:
                default_error = {"error": {"message": "fake_llm scripted error", "type": "server_error"}}
                self._send(item["status"], item.get("body", default_error))
            elif "raw" in item:
                self._send(200, item["raw"])
            elif body.get("stream"):
                default = "" if item.get("tool_calls") else "ok"
                pieces = item.get("chunks") or split(item.get("content", default))
                if item.get("think"):
                    pieces = [f"<think>{item['think']}</think>\n\n", *pieces]
                self._stream(body, pieces, item.get("chunk_delay", 0), item.get("hold"), item.get("tool_calls"),
                             item.get("usage", USAGE), item.get("cut", False), item.get("after_done"))
            else:
                hold = item.get("hold")
                if hold is not None and not fake.released(hold):  # answered once the test says so
                    return
                content = item.get("content", "".join(item.get("chunks", [])) or
                                   (None if item.get("tool_calls") else "ok"))
                if item.get("think"):
                    content = f"<think>{item['think']}</think>\n\n{content or ''}"
                self._send(200, _completion(body, content, item.get("tool_calls"), item.get("usage", USAGE)))

        def _stream(self, body: dict, pieces: list[str], delay: float = 0, hold=None, tool_calls=None,
                    usage=None, cut: bool = False, after_done: float | None = None) -> None:
            fake = self.fake
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            chunks = [_chunk(body, {"role": "assistant", "content": ""}, None)]
            chunks += [_chunk(body, {"content": p}, None) for p in pieces]
            for number, call in enumerate(tool_calls or []):
                half = len(call["arguments"]) // 2
                chunks.append(_chunk(body, {"tool_calls": [{"index": number, "id": f"call_{number}", "type": "function",
                                                            "function": {"name": call["name"],
                                                                         "arguments": call["arguments"][:half]}}]}, None))
                chunks.append(_chunk(body, {"tool_calls": [{"index": number, "function": {
                    "arguments": call["arguments"][half:]}}]}, None))
            chunks.append(_chunk(body, {}, "tool_calls" if tool_calls else "stop"))
            if (body.get("stream_options") or {}).get("include_usage") and usage is not None:
                chunks.append({**_chunk(body, {}, None), "choices": [], "usage": usage})
            if cut:  # the pieces, then half a chunk and the connection gone
                chunks = chunks[:1 + len(pieces)]
            for number, c in enumerate(chunks):
                if delay and 0 < number < len(chunks) - 1 and fake.closing_within(delay):
                    return
                if hold is not None and number == len(chunks) - 1 and not fake.released(hold):
                    return
                self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                self.wfile.flush()
            if cut:
                self.wfile.write(b'data: {"id": "chatcmpl-fake-cut", "choi')
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            if after_done is not None and not fake.closing_within(after_done):
                self.wfile.write(b": the end\n\n")
                self.wfile.flush()
            self.close_connection = True



USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def _completion(body: dict, content: str | None, tool_calls: list[dict] | None = None,
                usage: dict | None = None) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"call_{n}", "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for n, c in enumerate(tool_calls)]
    answer = {
        "id": body.get("_id", "chatcmpl-fake"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test-model"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


def _chunk(body: dict, delta: dict, finish_reason: str | None) -> dict:
    return {
        "id": body.get("_id", "chatcmpl-fake"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "test-model"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


@pytest.fixture
def fake_llm():
    yield from serving(FakeLLM())
