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

What differs between protocols is a `Dialect`: the endpoint and the path, the headers, where the memory
block goes, and how a reply's text and tool calls are read from an answer or from its stream's events.
OpenAI's chat completions is `OPENAI_CHAT` (the endpoint of the LLM settings, memvault's key); Anthropic's
Messages is `ANTHROPIC_MESSAGES` (anthropic_base_url; the client's own headers, its key and
anthropic-version / anthropic-beta among them, passed on as they came; the memory block one more
`system` block). An error the upstream answers is `errors.UpstreamAnswered`, its body kept as it came.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from memvault.errors import LLMError, UpstreamAnswered

__all__ = ["ANTHROPIC_MESSAGES", "ANTHROPIC_TRANSLATED", "Answer", "Delivery", "Dialect", "Event", "Forward", "OPENAI_CHAT", "Reply",
           "passed_headers", "post", "relay", "stream"]


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
    headers: dict = field(default_factory=dict)  # those a client reads (passed_headers)


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
    translated = False  # the request goes through litellm's translation, not as it came (_Translated)

    def upstream(self, settings) -> "Dialect":
        """The dialect that carries this protocol's requests under these settings (itself, or the one that
        translates them for another provider)."""
        return self

    def config(self, cfg, settings):
        """The endpoint, key and timeout of this protocol's upstream (an LLMConfig), given the LLM settings'."""
        return cfg

    def headers(self, api_key: str | None, passed: dict[str, str]) -> dict[str, str]:
        """The request's headers besides its content type: the client's `passed` on, and memvault's key."""
        return {}

    def reworded(self, exc: LLMError) -> LLMError:
        """An LLMError of llm.py's (whose words name the LLM settings) in this upstream's words."""
        return exc

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
    headers: dict = {}  # the response's (those a client reads), once the stream has begun

    def feed(self, data: Any) -> str:
        raise NotImplementedError

    def reply(self) -> Reply:
        raise NotImplementedError


# -- OpenAI's chat completions ---------------------------------------------------------------------

INSTRUCTION_ROLES = ("system", "developer")


class _OpenAIChat(Dialect):
    path = "/chat/completions"

    def headers(self, api_key: str | None, passed: dict[str, str]) -> dict[str, str]:
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


# -- Anthropic's Messages -------------------------------------------------------------------------------

ANTHROPIC_VERSION = "2023-06-01"  # what an Anthropic client sends; said for one that sent none
CREDENTIALS = ("x-api-key", "authorization")
# Not handed on: what belongs to the connection (httpx makes its own), and memvault's own headers.
_NOT_PASSED = {"host", "content-length", "content-type", "connection", "keep-alive", "transfer-encoding", "te",
               "trailer", "upgrade", "accept-encoding", "proxy-authorization", "proxy-connection", "expect"}
# Of the upstream's answer, what a client reads (request-id, retry-after, anthropic-ratelimit-*...): all
# but what belongs to the connection or that the server sets itself (a stream's cache-control among them).
_NOT_RETURNED = _NOT_PASSED | {"content-encoding", "date", "server", "set-cookie", "alt-svc", "via", "cache-control",
                               "x-accel-buffering"}


def passed_headers(headers, withheld: tuple[str, ...] = ()) -> dict[str, str]:
    """A client's request headers to hand to an Anthropic upstream: all of them (anthropic-version,
    anthropic-beta, x-api-key, user-agent, x-stainless-*...) but the connection's, memvault's own
    (x-memvault-*) and those `withheld` (the one that carried serve's own key)."""
    return {k: v for k, v in headers.items() if k.lower() not in _NOT_PASSED and not
            k.lower().startswith("x-memvault-") and k.lower() not in withheld}


def _returned(headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _NOT_RETURNED}


class _AnthropicMessages(Dialect):
    path = "/v1/messages"

    def upstream(self, settings) -> Dialect:
        return ANTHROPIC_TRANSLATED if settings.anthropic_upstream == "litellm" else self

    def config(self, cfg, settings):
        from memvault.store.llm import LLMConfig

        return LLMConfig(model=cfg.model, base_url=settings.anthropic_base_url, api_key=settings.anthropic_api_key,
                         timeout=settings.llm_timeout)

    def headers(self, api_key: str | None, passed: dict[str, str]) -> dict[str, str]:
        """The client's headers as they came; anthropic_api_key as x-api-key when it sent no credentials
        (with serve's key set, the one it sent for memvault is not passed on)."""
        headers = dict(passed)
        lower = {k.lower() for k in headers}
        if api_key and not lower & set(CREDENTIALS):
            headers["x-api-key"] = api_key
        if "anthropic-version" not in lower:
            headers["anthropic-version"] = ANTHROPIC_VERSION
        return headers

    def reworded(self, exc: LLMError) -> LLMError:
        said = str(exc)
        for theirs, ours in (
                ("llm_model (MEMVAULT_LLM_MODEL) / llm_base_url (MEMVAULT_LLM_BASE_URL)",
                 "the request's model / anthropic_base_url (MEMVAULT_ANTHROPIC_BASE_URL)"),
                ("llm_base_url (MEMVAULT_LLM_BASE_URL)", "anthropic_base_url (MEMVAULT_ANTHROPIC_BASE_URL)"),
                ("llm_api_key (MEMVAULT_LLM_API_KEY)",
                 "the client's key (x-api-key) or anthropic_api_key (MEMVAULT_ANTHROPIC_API_KEY)"),
                ("points at an OpenAI-compatible /v1 API", "points at an Anthropic Messages API"),
                ("OpenAI-style JSON", "JSON"), ("LLM endpoint", "Anthropic endpoint")):
            said = said.replace(theirs, ours)
        exc.args = (said,)
        return exc

    def with_block(self, body: dict, at: int, block: str) -> dict:
        """The block one more `system` text block after the client's own, which stay as they are (a
        string becomes the first block, its text unchanged; none: the block is the system prompt)."""
        system = body.get("system")
        if system is None or system == "" or system == []:
            return {**body, "system": block}
        own = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        return {**body, "system": [*own, {"type": "text", "text": block}]}

    def reply_of(self, data: Any) -> Reply:
        content = data.get("content") if isinstance(data, dict) else None
        text, calls = [], []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                text.append(block["text"])
            elif block.get("type") in ("tool_use", "server_tool_use"):
                calls.append({"name": str(block.get("name") or ""), "arguments": _arguments(block.get("input"))})
        return Reply("".join(text), calls)

    def reading(self) -> Reading:
        return _AnthropicReading()


def _arguments(value: Any) -> str:
    """A tool call's input as the JSON text stored (what OpenAI's `arguments` holds)."""
    if isinstance(value, str):  # a stream's pieces, joined
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


class _AnthropicReading(Reading):
    """Anthropic's stream: content_block_start / content_block_delta (text_delta, input_json_delta;
    thinking is not the reply) per block, message_stop at the end, an `error` event on failure."""

    def __init__(self):
        self.pieces: list[str] = []
        self.calls: dict[int, dict] = {}

    def feed(self, data: Any) -> str:
        if not isinstance(data, dict):
            return ""
        kind = data.get("type")
        if kind == "message_stop":
            self.ended = True
        elif kind == "error":
            error = data.get("error") if isinstance(data.get("error"), dict) else {}
            raise UpstreamSaid(str(error.get("message") or error.get("type") or "an error"))
        text = ""
        if kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            block = data["content_block"]
            if block.get("type") in ("tool_use", "server_tool_use"):
                start = block.get("input")
                self.calls[data.get("index", len(self.calls))] = {
                    "name": str(block.get("name") or ""), "arguments": json.dumps(start) if start else ""}
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                text = block["text"]
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            delta = data["delta"]
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                text = delta["text"]
            elif delta.get("type") == "input_json_delta" and data.get("index") in self.calls:
                self.calls[data["index"]]["arguments"] += str(delta.get("partial_json") or "")
        self.pieces.append(text)
        return text

    def reply(self) -> Reply:
        calls = [{"name": c["name"], "arguments": _arguments(c["arguments"])} for _, c in sorted(self.calls.items())]
        return Reply("".join(self.pieces), calls)


ANTHROPIC_MESSAGES = _AnthropicMessages()


class _AnthropicTranslated(_AnthropicMessages):
    """Anthropic's Messages to the LLM of the settings (llm_model at llm_base_url: any provider litellm
    reaches), the request translated by litellm's Messages interface and its answer translated back into
    Anthropic's shape (anthropic_upstream = "litellm"). The memory block goes in as for Anthropic (one more
    system block); the client's model name is not the upstream's (llm_model is), nor are its headers."""

    translated = True

    def upstream(self, settings) -> Dialect:
        return self

    def config(self, cfg, settings):
        return cfg  # the LLM settings, whose words llm.py's errors already use

    def reworded(self, exc: LLMError) -> LLMError:
        return exc


ANTHROPIC_TRANSLATED = _AnthropicTranslated()


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
    carry a tool round (the same message, sent again with the tools' results), `headers` the client's
    headers its dialect passes on."""

    dialect: Dialect
    body: dict
    at: int
    stream: bool
    tool_round: bool = False
    headers: dict = field(default_factory=dict)  # the client's, passed on (Anthropic's: passed_headers)
    query: str = ""  # the request's query, passed on (claude's `?beta=true`)


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


def _url(cfg, path: str) -> str:
    return cfg.base_url.rstrip("/") + path


def _with(path: str, query: str) -> str:
    return f"{path}?{query}" if query else path


def _request(cfg, dialect: Dialect, body: dict | None, headers: dict | None, method: str = "POST", path: str = ""):
    client = _client(cfg.base_url, cfg.timeout)
    sent = dialect.headers(cfg.api_key, headers or {})
    content = None
    if body is not None:
        sent = {"Content-Type": "application/json", **sent}
        content = json.dumps(body, ensure_ascii=False).encode()
    return client.build_request(method, _url(cfg, path or dialect.path), content=content, headers=sent)


def _failed(cfg, dialect: Dialect, exc: BaseException, response=None) -> LLMError:
    """The failure in llm.py's one line (the endpoint named, never a key), in the dialect's words; an
    error status the upstream answered: UpstreamAnswered, its body, type and headers kept."""
    from memvault.store import llm

    said = dialect.reworded(llm._llm_error(cfg, exc))
    if response is None:
        return said
    return UpstreamAnswered(str(said), status=response.status_code, body=response.content,
                            content_type=response.headers.get("content-type", "application/json"),
                            headers=_returned(response.headers))


def post(cfg, dialect: Dialect, body: dict, headers: dict | None = None, query: str = "") -> Answer:
    """The upstream's answer to `body` (not streamed), as it came; LLMError (llm.py's words, naming
    the endpoint) when it could not be had, UpstreamAnswered when it was an error status."""
    if dialect.translated:
        return _translated_post(cfg, dialect, body)
    client = _client(cfg.base_url, cfg.timeout)
    try:
        response = client.send(_request(cfg, dialect, body, headers, path=_with(dialect.path, query)))
        response.read()
    except Exception as exc:
        raise _failed(cfg, dialect, exc) from exc
    try:
        response.raise_for_status()
        data = response.json()
    except Exception as exc:
        raise _failed(cfg, dialect, exc, response if response.status_code >= 400 else None) from exc
    return Answer(response.status_code, response.headers.get("content-type", "application/json"),
                  response.content, data, _returned(response.headers))


def relay(cfg, dialect: Dialect, method: str, path: str, body: dict | None = None,
          headers: dict | None = None) -> Answer:
    """A request that carries no message (Anthropic's count_tokens, its model list) handed to the
    upstream as it came, and its answer as it came, an error status too; LLMError when none could be
    had. `path`: the upstream's, with its query."""
    if dialect.translated:
        return _translated_relay(cfg, method, path, body)
    client = _client(cfg.base_url, cfg.timeout)
    try:
        response = client.send(_request(cfg, dialect, body, headers, method, path))
        response.read()
    except Exception as exc:
        raise _failed(cfg, dialect, exc) from exc
    try:
        data = response.json()
    except ValueError:
        data = None
    return Answer(response.status_code, response.headers.get("content-type", "application/json"),
                  response.content, data, _returned(response.headers))


def stream(cfg, dialect: Dialect, body: dict, reading: Reading, headers: dict | None = None,
           query: str = "") -> Iterator[Event]:
    """The upstream's stream for `body`, event by event as each comes, each with the reply text it
    carries (`reading`, the dialect's, holds the whole reply at the end; `reading.headers` the
    response's); LLMError when it could not be had or broke off before its end, UpstreamAnswered when
    it was an error status or an error event (`event`: its bytes as they came)."""
    import httpx

    from memvault.store import llm

    if dialect.translated:
        yield from _translated_stream(cfg, dialect, body, reading)
        return
    client = _client(cfg.base_url, cfg.timeout)
    url = llm.display_url(cfg.base_url)
    try:
        response = client.send(_request(cfg, dialect, body, headers, path=_with(dialect.path, query)), stream=True)
    except Exception as exc:
        raise _failed(cfg, dialect, exc) from exc
    if response.status_code >= 400:
        try:
            response.read()
            response.raise_for_status()
        except Exception as exc:
            raise _failed(cfg, dialect, exc, response) from exc
        finally:
            response.close()
    reading.headers = _returned(response.headers)
    try:
        lines: list[str] = []
        for line in response.iter_lines():
            if line:
                lines.append(line)
                continue
            if lines:
                try:
                    yield _event(lines, reading)
                except UpstreamSaid as said:
                    raise UpstreamAnswered(dialect.reworded(_failed_mid_stream(url, said)).args[0],
                        body=("\n".join(lines) + "\n\n").encode(), content_type="text/event-stream",
                        event=True) from None
                lines = []
        # Lines after the last blank line are an event never finished: an upstream that broke off.
    except httpx.TimeoutException as exc:
        raise _failed(cfg, dialect, exc) from exc
    except httpx.HTTPError as exc:  # the connection broke mid-stream
        raise dialect.reworded(_broke_off(url, llm._first_line(exc))) from exc
    finally:
        response.close()
    if not reading.ended:
        raise dialect.reworded(_broke_off(url, "the stream ended before its end"))


def _failed_mid_stream(url: str, said: BaseException) -> LLMError:
    from memvault.store import llm

    return LLMError(f"LLM endpoint {url} failed mid-stream ({llm._first_line(said)}); "
                    "check the server at llm_base_url (MEMVAULT_LLM_BASE_URL)")


def _broke_off(url: str, why: str) -> LLMError:
    return LLMError(f"LLM endpoint {url} broke off its reply mid-stream ({why}); "
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


# -- Anthropic's Messages translated by litellm (anthropic_upstream = "litellm") ---------------------------

# The fields of a Messages request litellm's translation takes. The others (the client's model: llm_model is
# the upstream's; Anthropic-only options such as `container` or `service_tier`) have no meaning for another
# provider and are not handed on.
TRANSLATED_FIELDS = ("max_tokens", "messages", "system", "metadata", "stop_sequences", "temperature", "thinking",
                     "tool_choice", "tools", "top_k", "top_p")


def _translated_call(cfg, body: dict, streamed: bool):
    from memvault.errors import UsageError
    from memvault.store import llm

    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise UsageError("max_tokens must be a whole number above 0 (Anthropic's Messages API asks for it)")
    lib = llm._lib()
    # For an openai/ model litellm would send the request to OpenAI's Responses API, which few
    # OpenAI-compatible servers (llama.cpp, Ollama, vLLM) have; chat completions all of them speak.
    lib.use_chat_completions_url_for_anthropic_messages = True
    fields = {name: body[name] for name in TRANSLATED_FIELDS if body.get(name) is not None}
    return lib.anthropic_interface.create(model=cfg.model, stream=streamed, api_base=cfg.base_url,
                                          api_key=cfg.api_key or llm._NO_KEY, timeout=cfg.timeout, num_retries=0,
                                          **fields)  # one attempt: the client retries as it chooses


def _translated_post(cfg, dialect: Dialect, body: dict) -> Answer:
    """litellm's answer, in Anthropic's shape."""
    from memvault.errors import MemvaultError

    try:
        data = dict(_translated_call(cfg, body, False))
    except MemvaultError:
        raise
    except Exception as exc:
        raise _failed(cfg, dialect, exc) from exc
    return Answer(200, "application/json", json.dumps(data, ensure_ascii=False, default=str).encode(), data)


def _translated_stream(cfg, dialect: Dialect, body: dict, reading: Reading) -> Iterator[Event]:
    """litellm's stream (Anthropic's server-sent events, as bytes), event by event."""
    from memvault.errors import MemvaultError
    from memvault.store import llm

    try:
        chunks = _translated_call(cfg, body, True)
        pending = ""
        for chunk in chunks:
            pending += chunk.decode("utf-8") if isinstance(chunk, bytes) else str(chunk)
            while "\n\n" in pending:
                block, pending = pending.split("\n\n", 1)
                lines = [line for line in block.split("\n") if line]
                if lines:
                    try:
                        yield _event(lines, reading)
                    except UpstreamSaid as said:
                        raise _failed_mid_stream(llm.display_url(cfg.base_url), said) from None
    except MemvaultError:
        raise
    except Exception as exc:
        raise _failed(cfg, dialect, exc) from exc
    if not reading.ended:
        raise _broke_off(llm.display_url(cfg.base_url), "the stream ended before its end")


def _translated_relay(cfg, method: str, path: str, body: dict | None) -> Answer:
    """count_tokens and the model list, answered for llm_model: the tokens of the request's text
    (litellm's tokenizer for the model), and the one model every request goes to."""
    from memvault.store import llm

    bare = path.split("?", 1)[0].rstrip("/")
    if method == "POST" and bare == "/v1/messages/count_tokens":
        body = body or {}
        texts = [_words(body.get("system"))] + [_words(m.get("content")) for m in body.get("messages") or []
                                                if isinstance(m, dict)]
        try:  # the words' tokens (litellm.encode: its token_counter is off in memvault, see llm._lib)
            data: Any = {"input_tokens": len(llm._lib().encode(model=cfg.model, text="\n".join(texts)))}
        except Exception as exc:
            raise _failed(cfg, ANTHROPIC_TRANSLATED, exc) from exc
    elif method == "GET" and (bare == "/v1/models" or bare.startswith("/v1/models/")):
        model = {"type": "model", "id": cfg.model, "display_name": cfg.model, "created_at": "1970-01-01T00:00:00Z"}
        data = model if bare.startswith("/v1/models/") else {"data": [model], "has_more": False,
                                                             "first_id": cfg.model, "last_id": cfg.model}
    else:
        data = {"type": "error", "error": {"type": "not_found_error",
                                           "message": f"{method} {bare} is not served with anthropic_upstream = litellm"}}
        return Answer(404, "application/json", json.dumps(data).encode(), data)
    return Answer(200, "application/json", json.dumps(data).encode(), data)


def _words(content: Any) -> str:
    """The text of a `system` or a message's content (a string, or its blocks' text and tool input)."""
    if isinstance(content, str):
        return content
    words = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            for key in ("text", "content", "input"):
                value = block.get(key)
                if value:
                    words.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return "\n".join(words)
