"""The LLM client: the only module that imports litellm.

litellm costs seconds to import, so it is loaded on the first call, never at import of
this module. Every transport failure becomes an ``LLMError`` whose message is one line
naming the endpoint and the setting to change; the API key never appears in it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

import pydantic

from memvault.errors import LLMError, LLMTimeout

__all__ = [
    "DEFAULT_BASE_URL", "LLMConfig", "LLMError", "chat", "chat_stream", "list_models", "structured",
    "structured_probs", "json_schema", "parse_structured", "strip_think",
]

DEFAULT_BASE_URL = "http://localhost:11434/v1"
# The openai client refuses to start without a key; local servers ignore it.
_NO_KEY = "sk-no-key"

M = TypeVar("M", bound=pydantic.BaseModel)


@dataclass(frozen=True)
class LLMConfig:
    model: str  # a litellm model string, e.g. "openai/qwen3:4b"
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    temperature: float = 0.0

    @classmethod
    def from_settings(cls, settings) -> "LLMConfig":
        """The LLM part of the vault's settings (llm_model, llm_base_url, llm_api_key, ...)."""
        return cls(model=settings.llm_model, base_url=settings.llm_base_url, api_key=settings.llm_api_key,
                   timeout=settings.llm_timeout, temperature=settings.llm_temperature)


_litellm: ModuleType | None = None


def _lib() -> ModuleType:
    """Import and quiet litellm once, so it never reaches the network or prints by itself."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners
        litellm.drop_params = False
        litellm.callbacks = []
        litellm.success_callback = []
        litellm.failure_callback = []
        litellm.input_callback = []
        litellm.service_callback = []
        # With no callbacks there is nothing to log, yet litellm would still hand every streamed
        # chunk to a logging thread and count the prompt's tokens with tiktoken at the end of a
        # stream, for a usage figure memvault never reads: 9.3 -> 6.6 ms a streamed call (local server).
        litellm.disable_streaming_logging = True
        litellm.disable_token_counter = True
        # litellm's handler writes records below WARNING to stdout, which memvault keeps for
        # results; our LLMError already says what went wrong.
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        # litellm's own types trip this pydantic warning on the first streamed reply.
        warnings.filterwarnings("ignore", message=r"Item '\w+' on TypedDict class .* `ReadOnly`")
        _litellm = litellm
    return _litellm


def _completion(cfg: LLMConfig, messages: list[dict], **extra: Any) -> Any:
    params = {"temperature": cfg.temperature, **extra}  # a caller's own sampling options win
    try:
        return _lib().completion(
            model=cfg.model,
            messages=messages,
            api_base=cfg.base_url,
            api_key=cfg.api_key or _NO_KEY,
            timeout=cfg.timeout,
            num_retries=0,  # one attempt: a down endpoint fails fast, within cfg.timeout
            **params,
        )
    except Exception as exc:
        raise _llm_error(cfg, exc) from exc


def chat(cfg: LLMConfig, messages: list[dict], **options: Any) -> str:
    """The whole reply text, with any leading <think> block removed. options: OpenAI sampling
    parameters (max_tokens, top_p, stop, ...) passed through."""
    response = _completion(cfg, messages, **options)
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError) as exc:
        raise _llm_error(cfg, exc) from exc
    return strip_think(content or "")


def chat_stream(cfg: LLMConfig, messages: list[dict], **options: Any) -> Iterator[str]:
    """Yield reply text pieces as the server sends them (SSE), without a leading <think> block."""
    stream = _completion(cfg, messages, **options, stream=True)
    think = _ThinkFilter()
    try:
        for chunk in stream:
            choices = getattr(chunk, "choices", None)
            piece = choices[0].delta.content if choices else None
            if piece:
                if out := think.feed(piece):
                    yield out
    except LLMError:
        raise
    except Exception as exc:  # the connection can also break mid-stream
        raise _llm_error(cfg, exc) from exc
    if rest := think.flush():
        yield rest


def list_models(cfg: LLMConfig) -> list[dict]:
    """The endpoint's `GET /models` list (OpenAI shape: `data`, each with an `id`), asked with httpx:
    litellm has no call for it that works with every OpenAI-compatible server."""
    import httpx

    headers = {"Authorization": f"Bearer {cfg.api_key or _NO_KEY}"}
    try:
        response = httpx.get(cfg.base_url.rstrip("/") + "/models", headers=headers, timeout=cfg.timeout)
        response.raise_for_status()
        data = response.json().get("data")
    except Exception as exc:
        raise _llm_error(cfg, exc) from exc
    if not isinstance(data, list):
        raise LLMError(f"LLM endpoint {display_url(cfg.base_url)} answered /models without a list of models; "
                       "check llm_base_url (MEMVAULT_LLM_BASE_URL) points at an OpenAI-compatible /v1 API")
    return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


def structured(
    cfg: LLMConfig, messages: list[dict], schema: type[M], *, retries: int = 1
) -> M | None:
    """Ask for JSON matching `schema`; None when the answers stay invalid after `retries`.

    The schema goes out as an OpenAI ``json_schema`` response format, which llama-server and
    Ollama enforce with a grammar; replies are still parsed tolerantly for servers that don't.
    Transport failures raise LLMError and are not retried.
    """
    answer = _structured(cfg, messages, schema, retries, logprobs=False)
    return answer[0] if answer else None


def structured_probs(
    cfg: LLMConfig, messages: list[dict], schema: type[M], field: str, *, retries: int = 1
) -> tuple[M, dict[str, float]] | None:
    """Like `structured`, plus how sure the model was of `field`, a string enum of `schema`.

    Returns the answer and {option: probability} over the enum's options: the model's own
    token probabilities where it wrote the value, renormalised over the options (they
    should differ in their first token, like "yes"/"no"). A server that reports no
    log-probabilities gives {chosen option: 1.0}; one that refuses them is asked again
    without. None when the answers stay invalid after `retries`.
    """
    options = json_schema(schema)["properties"][field]["enum"]
    try:
        answer = _structured(cfg, messages, schema, retries, logprobs=True)
    except LLMError as err:
        if not re.search(r"HTTP (400|422)\b", str(err)):
            raise
        answer = _structured(cfg, messages, schema, retries, logprobs=False)
    if answer is None:
        return None
    parsed, choice, content = answer
    chosen = getattr(parsed, field)
    return parsed, _option_probs(choice, content, field, options, chosen)


def _structured(
    cfg: LLMConfig, messages: list[dict], schema: type[M], retries: int, logprobs: bool
) -> tuple[M, Any, str] | None:
    """The parsed answer, the raw choice and its text; None when invalid after `retries`."""
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": json_schema(schema), "strict": True},
    }
    extra: dict[str, Any] = {"logprobs": True, "top_logprobs": 10} if logprobs else {}
    messages = list(messages)
    for attempt in range(retries + 1):
        # allowed_openai_params: pass response_format through even for models litellm
        # believes cannot take it (e.g. "openai/gpt-4"), instead of failing client-side.
        response = _completion(
            cfg, messages, response_format=response_format,
            allowed_openai_params=["response_format", *extra], **extra,
        )
        try:
            choice = response.choices[0]
            answer = choice.message.content or ""
        except (AttributeError, IndexError) as exc:
            raise _llm_error(cfg, exc) from exc
        try:
            return parse_structured(answer, schema), choice, answer
        except ValueError as err:
            if attempt == retries:
                return None
            messages += [
                {"role": "assistant", "content": answer},
                {
                    "role": "user",
                    "content": f"That answer was invalid: {err}. "
                    "Reply again with only the JSON, matching the schema.",
                },
            ]
    return None


def _option_probs(choice: Any, content: str, field: str, options: list[str], chosen: str) -> dict[str, float]:
    """{option: probability} at the token where `content` gives `field`'s value."""
    import math

    fallback = {option: float(option == chosen) for option in options}
    tokens = getattr(getattr(choice, "logprobs", None), "content", None)
    where = re.search(rf'"{re.escape(field)}"\s*:\s*"', content)
    if not tokens or where is None:
        return fallback
    offset, start = where.end(), 0
    for token in tokens:  # the token in which the value starts
        text = getattr(token, "token", "") or ""
        if start + len(text) > offset:
            break
        start += len(text)
    else:
        return fallback
    cut = offset - start  # the value starts this far into the token (after a merged quote)
    mass = dict.fromkeys(options, 0.0)
    for top in getattr(token, "top_logprobs", None) or []:
        piece = top.token or ""
        if piece[:cut] != text[:cut] or not piece[cut:]:
            continue
        for option in options:
            if option.startswith(piece[cut:]):
                mass[option] += math.exp(top.logprob)
                break
    total = sum(mass.values())
    return {option: p / total for option, p in mass.items()} if total > 0 else fallback


# --- JSON schema and tolerant parsing -------------------------------------------------


def json_schema(schema: type[pydantic.BaseModel]) -> dict:
    """The model's JSON schema with $refs inlined and objects closed.

    Small servers' schema-to-grammar converters handle inline schemas best, and OpenAI's
    strict mode requires ``additionalProperties: false`` on every object.
    """
    raw = schema.model_json_schema()
    defs = raw.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(defs[node["$ref"].rsplit("/", 1)[-1]])
            out = {k: resolve(v) for k, v in node.items()}
            if out.get("type") == "object":
                out.setdefault("additionalProperties", False)
            return out
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(raw)


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def strip_think(text: str) -> str:
    """Remove <think>...</think> blocks (qwen3, deepseek-r1) and a dangling closing tag."""
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text.lower():  # the opening tag was part of the prompt template
        text = re.split(r"</think>", text, flags=re.IGNORECASE)[-1]
    return text.strip()


def parse_structured(text: str, schema: type[M]) -> M:
    """The first JSON value in `text` that validates against `schema`.

    Tolerates code fences, prose around the JSON and think blocks. A bare list is accepted
    when the schema is an object with a single list field. Raises ValueError (with a short
    reason) when nothing validates.
    """
    text = strip_think(text)
    decoder = json.JSONDecoder()
    wrap_field = _single_list_field(schema)
    last_error = "no JSON object found in the answer"
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, list) and wrap_field:
            value = {wrap_field: value}
        try:
            return schema.model_validate(value)
        except pydantic.ValidationError as err:
            last_error = _short_validation_error(err)
    raise ValueError(last_error)


def _single_list_field(schema: type[pydantic.BaseModel]) -> str | None:
    fields = schema.model_fields
    if len(fields) != 1:
        return None
    name, info = next(iter(fields.items()))
    origin = getattr(info.annotation, "__origin__", info.annotation)
    return name if origin is list else None


def _short_validation_error(err: pydantic.ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(p) for p in e["loc"]) or "answer"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


class _ThinkFilter:
    """Drops a <think>...</think> block at the start of a streamed reply, across chunks."""

    _OPEN, _CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self._buffer = ""
        self._state = "start"  # start -> [think ->] strip -> pass

    def feed(self, piece: str) -> str:
        if self._state == "pass":
            return piece
        self._buffer += piece
        if self._state == "start":
            head = self._buffer.lstrip().lower()
            if len(head) < len(self._OPEN) and self._OPEN.startswith(head):
                return ""  # may still become "<think>"
            if not head.startswith(self._OPEN):
                self._state = "pass"
                out, self._buffer = self._buffer, ""
                return out
            self._state = "think"
        if self._state == "think":
            end = self._buffer.lower().find(self._CLOSE)
            if end < 0:
                self._buffer = self._buffer[-len(self._CLOSE) :]  # room for a split closing tag
                return ""
            self._buffer = self._buffer[end + len(self._CLOSE) :]
            self._state = "strip"
        out, self._buffer = self._buffer.lstrip(), ""  # the blank lines after </think>
        if out:
            self._state = "pass"
        return out

    def flush(self) -> str:
        """What is left at the end: a short reply that only looked like "<think>" starting."""
        out, self._buffer = self._buffer, ""
        return out if self._state == "start" else ""


# --- errors ------------------------------------------------------------------------------


def _llm_error(cfg: LLMConfig, exc: BaseException) -> LLMError:
    """Turn litellm/openai/httpx exceptions into one user-facing line."""
    import httpx
    import openai

    url = display_url(cfg.base_url)
    chain = _exception_chain(exc)
    kind, status = LLMError, None
    if any(isinstance(e, (openai.APITimeoutError, httpx.TimeoutException, TimeoutError)) for e in chain):
        msg = (
            f"LLM endpoint {url} did not answer within {cfg.timeout:g}s; "
            "check llm_base_url (MEMVAULT_LLM_BASE_URL), or raise llm_timeout (MEMVAULT_LLM_TIMEOUT)"
        )
        kind = LLMTimeout
    elif any(isinstance(e, (openai.APIConnectionError, httpx.TransportError, ConnectionError)) for e in chain):
        msg = (
            f"LLM endpoint {url} is unreachable ({_connect_reason(chain)}); "
            "check llm_base_url (MEMVAULT_LLM_BASE_URL)"
        )
    elif "LLM Provider NOT provided" in str(exc):
        msg = (
            f"LLM model {cfg.model!r} has no provider prefix; "
            "set llm_model (MEMVAULT_LLM_MODEL) to e.g. 'openai/<model>' for an OpenAI-compatible server"
        )
    elif response := _http_error_response(chain):
        status = response.status_code
        hint = (
            "check llm_api_key (MEMVAULT_LLM_API_KEY)"
            if status in (401, 403)
            else "check llm_model (MEMVAULT_LLM_MODEL) / llm_base_url (MEMVAULT_LLM_BASE_URL)"
        )
        msg = f"LLM endpoint {url} answered HTTP {status}: {_http_reason(response)}; {hint}"
    elif any(isinstance(e, json.JSONDecodeError) for e in chain):
        msg = (
            f"LLM endpoint {url} answered with something that is not OpenAI-style JSON; "
            "check llm_base_url (MEMVAULT_LLM_BASE_URL) points at an OpenAI-compatible /v1 API"
        )
    elif any(type(e).__name__ == "MidStreamFallbackError" for e in chain):
        msg = (
            f"LLM endpoint {url} broke off its reply mid-stream ({_first_line(exc)}); "
            "check the server at llm_base_url (MEMVAULT_LLM_BASE_URL)"
        )
    else:
        msg = (
            f"LLM call to {url} failed ({_first_line(exc)}); "
            "check llm_model (MEMVAULT_LLM_MODEL) / llm_base_url (MEMVAULT_LLM_BASE_URL)"
        )
    if cfg.api_key and len(cfg.api_key) >= 4:  # a server may echo the key in its error text
        msg = msg.replace(cfg.api_key, "***")
    return kind(msg, status=status)


def display_url(url: str) -> str:
    """The base URL with any password in it masked."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _connect_reason(chain: list[BaseException]) -> str:
    import socket

    for e in reversed(chain):  # the innermost cause is the most specific
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, socket.gaierror):
            return "host not found"
    return "connection failed"


def _http_error_response(chain: list[BaseException]) -> Any:
    """The server's real error response, if the failure was an HTTP error status.

    litellm also reports client-side failures with status 500, so only the openai SDK's or
    httpx's own status errors count; they carry the response that came over the wire.
    """
    import httpx
    import openai

    for e in chain:
        if isinstance(e, httpx.HTTPStatusError) or (
            isinstance(e, openai.APIStatusError) and type(e).__module__.startswith("openai")
        ):
            return e.response
    return None


def _http_reason(response: Any) -> str:
    """The server's own error message, from the JSON body when there is one."""
    try:
        text = response.text
    except Exception:  # a streamed response whose body was never read
        return response.reason_phrase
    try:
        body = json.loads(text)
        error = body.get("error", body) if isinstance(body, dict) else body
        text = str(error.get("message", error) if isinstance(error, dict) else error)
    except ValueError:
        pass
    return _first_line(text) or response.reason_phrase


# litellm's class names before its text, as many as it stacks ("litellm.APIConnectionError:
# APIConnectionError: OpenAIException - ..."), and the copy of the whole chain it appends.
_LITELLM_PREFIX = re.compile(r"^(((litellm\.)?\w+(Error|Exception))(: | - ))*")
_LITELLM_CHAIN = re.compile(r"\s*(Original exception|Received Model Group|LiteLLM Retried)\b.*", re.DOTALL)


def _first_line(value: object, limit: int = 160) -> str:
    """A short single line of an error text, without litellm's class-name prefixes and chain."""
    lines = _LITELLM_CHAIN.sub("", _LITELLM_PREFIX.sub("", str(value).strip())).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else ""
    if not text and isinstance(value, BaseException):
        text = type(value).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
