"""A proxy's call to the upstream model (docs/design.md, "The library API and its faces": serve): the
client's request as it sent it, with one change, the memory block, posted with httpx to the upstream's
HTTP endpoint; its answer handed back as it came, byte for byte in a stream, and read on the way for what
is stored (the reply's text and tool calls).

Not through litellm, which stays the client for memvault's own calls (extraction, reconcile,
summaries): its provider mapping transforms a request to fit what it believes of the model (o-series
and gpt-5 models: a temperature refused before the request leaves, system messages rewritten as user
ones; `developer` rewritten as `system` for others; fields it does not know dropped or refused) and
rebuilds the answer (usage fields the upstream never sent, a zero usage when it sent none). A proxy
must hand on what the client chose and what the upstream answered.

What differs between protocols is a `Dialect`: the path, the headers, where the memory block goes, and
how a reply's text and tool calls are read from an answer or from its stream's events. OpenAI's chat
completions is `OPENAI_CHAT`; another protocol's face (Anthropic's Messages) adds one.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from memvault.errors import LLMError

__all__ = ["Answer", "Delivery", "Dialect", "Event", "Forward", "OPENAI_CHAT", "Reply", "post", "stream"]


@dataclass
class Reply:
    """What a reply said, as it is stored: its text and the tools it called ({name, arguments})."""

    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)


@dataclass
class Answer:
    """The upstream's whole answer to a request that did not stream: status, content type and body as
    they came, the body parsed."""

    status: int
    content_type: str
    raw: bytes
    data: Any


@dataclass
class Event:
    """One server-sent event of a stream, as it came (`raw`, its lines and the blank line after them),
    its data parsed (None for one that is not JSON: OpenAI's `[DONE]`), and the reply text it carries."""

    raw: bytes
    data: Any = None
    text: str = ""


class Dialect:
    """One protocol's view of a request and its answer (docs/design.md, "The library API and its faces")."""

    path = ""

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {}

    def with_block(self, body: dict, at: int, block: str) -> dict:
        """The request with the memory block put in, the client's own fields untouched."""
        raise NotImplementedError

    def reply_of(self, data: Any) -> Reply:
        """The reply an answer carries."""
        raise NotImplementedError

    def reading(self) -> "Reading":
        """A reader of one stream's events."""
        raise NotImplementedError


class Reading:
    """A stream read event by event: `feed` gives the text an event carries; `reply` what the whole said;
    `ended` whether the protocol's end came (else the upstream broke off)."""

    ended = False

    def feed(self, data: Any) -> str:
        raise NotImplementedError

    def reply(self) -> Reply:
        raise NotImplementedError


# -- OpenAI's chat completions ---------------------------------------------------------------------

INSTRUCTION_ROLES = ("system", "developer")


class _OpenAIChat(Dialect):
    path = "/chat/completions"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def with_block(self, body: dict, at: int, block: str) -> dict:
        """One message before the user's message at `at`, of the role the client's first instruction
        message has (`system` or `developer`: an o-series model takes `developer`, an older one
        `system`, and the client knows which), `system` when it sent none."""
        messages = body["messages"]
        role = next((m["role"] for m in messages if m.get("role") in INSTRUCTION_ROLES), "system")
        return {**body, "messages": [*messages[:at], {"role": role, "content": block}, *messages[at:]]}

    def reply_of(self, data: Any) -> Reply:
        choices = data.get("choices") if isinstance(data, dict) else None
        message = (choices[0].get("message") if choices and isinstance(choices[0], dict) else None) or {}
        calls = [_call(c.get("function") or {}) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        return Reply(message.get("content") if isinstance(message.get("content"), str) else "", calls)

    def reading(self) -> Reading:
        return _OpenAIReading()


def _call(function: dict) -> dict:
    return {"name": str(function.get("name") or ""), "arguments": str(function.get("arguments") or "")}


class _OpenAIReading(Reading):
    def __init__(self):
        self.pieces: list[str] = []
        self.calls: dict[int, dict] = {}

    def feed(self, data: Any) -> str:
        if data == "[DONE]":
            self.ended = True
            return ""
        if not isinstance(data, dict):
            return ""
        if isinstance(data.get("error"), dict):  # OpenAI's way to fail after the start
            message = data["error"].get("message") or "an error"
            raise UpstreamSaid(str(message))
        text = ""
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # n > 1 is refused: a stray choice is not the reply
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text += delta["content"]
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                held = self.calls.setdefault(call.get("index", len(self.calls)), {"name": "", "arguments": ""})
                function = call.get("function") or {}
                held["name"] += str(function.get("name") or "")
                held["arguments"] += str(function.get("arguments") or "")
        self.pieces.append(text)
        return text

    def reply(self) -> Reply:
        return Reply("".join(self.pieces), [self.calls[n] for n in sorted(self.calls)])


OPENAI_CHAT = _OpenAIChat()


class UpstreamSaid(Exception):
    """An error event in an upstream's stream (its words)."""


class Delivery:
    """What a face's client got of a reply, said by the face that hands it on (a proxy): each piece of
    text as it went out (`handed`), then whether the client got the whole answer (`settle`). The chat turn's
    store waits for the word (SETTLE_WAIT at most), and stores the reply the client got: the whole, the
    text sent so far (`partial: true`), or the whole marked `delivered: false`."""

    def __init__(self):
        self._sent: list[str] = []
        self._settled = threading.Event()
        self.complete: bool | None = None

    def handed(self, text: str) -> None:
        if text and not self._settled.is_set():  # once settled, what the client got is said
            self._sent.append(text)

    def settle(self, complete: bool) -> None:
        if not self._settled.is_set():
            self.complete = complete
            self._settled.set()

    @property
    def text(self) -> str:
        return "".join(self._sent)

    def wait(self, timeout: float) -> bool:
        return self._settled.wait(timeout)


# -- what a proxy forwards ---------------------------------------------------------------------------

@dataclass
class Forward:
    """A client's request for the upstream: `body` as the client sent it (`model` the name the upstream
    gets), `at` the position of the user's message in it, `tool_round` whether messages after it
    carry a tool round (the same message, sent again with the tools' results)."""

    dialect: Dialect
    body: dict
    at: int
    stream: bool
    tool_round: bool = False


# -- the call -----------------------------------------------------------------------------------------

_clients: dict[tuple[str, float], Any] = {}
_clients_lock = threading.Lock()


def _client(base_url: str, timeout: float):
    """One httpx client per endpoint and timeout, kept: its connections are reused (a request pays no
    TCP set-up), and it is safe to share between threads."""
    import httpx

    key = (base_url, timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = httpx.Client(timeout=httpx.Timeout(timeout), follow_redirects=False)
        return client


def _url(cfg, dialect: Dialect) -> str:
    return cfg.base_url.rstrip("/") + dialect.path


def _request(cfg, dialect: Dialect, body: dict):
    client = _client(cfg.base_url, cfg.timeout)
    headers = {"Content-Type": "application/json", **dialect.headers(cfg.api_key)}
    return client.build_request("POST", _url(cfg, dialect), content=json.dumps(body, ensure_ascii=False).encode(),
                                headers=headers)


def post(cfg, dialect: Dialect, body: dict) -> Answer:
    """The upstream's answer to `body` (not streamed), as it came; LLMError (llm.py's words, naming
    the endpoint) when it could not be had or was an error status."""
    from memvault.store import llm

    client = _client(cfg.base_url, cfg.timeout)
    try:
        response = client.send(_request(cfg, dialect, body))
        response.read()
        response.raise_for_status()
        data = response.json()
    except Exception as exc:
        raise llm._llm_error(cfg, exc) from exc
    return Answer(response.status_code, response.headers.get("content-type", "application/json"),
                  response.content, data)


def stream(cfg, dialect: Dialect, body: dict, reading: Reading) -> Iterator[Event]:
    """The upstream's stream for `body`, event by event as each comes, each with the reply text it
    carries (`reading`, the dialect's, holds the whole reply at the end); LLMError when it could not be
    had, was an error status, or broke off before its end."""
    import httpx

    from memvault.store import llm

    client = _client(cfg.base_url, cfg.timeout)
    url = llm.display_url(cfg.base_url)
    try:
        response = client.send(_request(cfg, dialect, body), stream=True)
        if response.status_code >= 400:
            try:
                response.read()
                response.raise_for_status()
            finally:
                response.close()
    except Exception as exc:
        raise llm._llm_error(cfg, exc) from exc
    try:
        lines: list[str] = []
        for line in response.iter_lines():
            if line:
                lines.append(line)
                continue
            if lines:
                yield _event(lines, reading)
                lines = []
        # Lines after the last blank line are an event never finished: an upstream that broke off.
    except UpstreamSaid as said:
        raise LLMError(f"LLM endpoint {url} failed mid-stream ({llm._first_line(said)}); "
                       "check the server at llm_base_url (MEMVAULT_LLM_BASE_URL)") from None
    except httpx.TimeoutException as exc:
        raise llm._llm_error(cfg, exc) from exc
    except httpx.HTTPError as exc:  # the connection broke mid-stream
        raise LLMError(f"LLM endpoint {url} broke off its reply mid-stream ({llm._first_line(exc)}); "
                       "check the server at llm_base_url (MEMVAULT_LLM_BASE_URL)") from exc
    finally:
        response.close()
    if not reading.ended:
        raise LLMError(f"LLM endpoint {url} broke off its reply mid-stream (the stream ended before its end); "
                       "check the server at llm_base_url (MEMVAULT_LLM_BASE_URL)")


def _event(lines: list[str], reading: Reading) -> Event:
    """One event of its lines: the data lines' values joined (the SSE rule), parsed as JSON when they
    are JSON; comments and other fields kept in `raw` only."""
    data_lines = [line[5:].removeprefix(" ") for line in lines if line.startswith("data:")]
    raw = ("\n".join(lines) + "\n\n").encode()
    if not data_lines:
        return Event(raw)
    text = "\n".join(data_lines)
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = text  # OpenAI's `[DONE]`, or a line that is not JSON (an upstream that broke off mid-event)
        if text.strip() != "[DONE]":
            return Event(raw, None, "")
        data = "[DONE]"
    return Event(raw, data, reading.feed(data))
