"""OpenAI's protocol on serve (docs/design.md, "The library API and its faces"): `POST /v1/chat/completions`
(`Memvault.chat` with the client's request, through serving.Exchanges), `GET /v1/models` and
`GET /v1/models/{id}` (`Memvault.llm_models`). A request is checked and turned into a ChatCall
(`parse_chat`) whose `forward` is the request as it came (store/upstream.py: handed to the upstream
with the memory block added, nothing else changed); the upstream's answer goes back as it came, as
one response or its stream's events (serving.complete, serving.stream: every protocol's), and the face
says what its client got (chat.Delivery: serving.Handed, serving.HandedStream); a failure mid-stream is
OpenAI's error event (`error_event`). Another chat protocol is one more module like this one
(routes_anthropic.py), with its dialect in store/upstream.py.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request

from memvault.errors import UsageError
from memvault.faces.http import (ApiError, ExchangesDep, OptionsDep, VaultDep, as_api_error, blocking, error_body,
                                 json_object, json_response)
from memvault.faces import serving
from memvault.faces.serving import ChatCall
from memvault.store import files, upstream

CONVERSATION_HEADER = "x-memvault-conversation"
RETRY_HEADER = "x-stainless-retry-count"  # openai-python numbers its retries of a request
# Request fields whose type is checked here (a wrong one is the client's mistake, said with its name).
# Every field the client sends goes to the upstream as it is (store/upstream.py): these too, and
# `user` and `metadata`, which may also name the conversation.
SAMPLING = {"temperature": (int, float), "top_p": (int, float), "presence_penalty": (int, float),
            "frequency_penalty": (int, float), "max_tokens": int, "max_completion_tokens": int, "seed": int,
            "stop": (str, list), "response_format": dict, "tools": list, "tool_choice": (str, dict),
            "logprobs": bool, "top_logprobs": int, "logit_bias": dict, "reasoning_effort": str,
            "stream_options": dict, "parallel_tool_calls": bool, "metadata": dict, "user": str}
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}

router = APIRouter()


@router.get("/v1/models")
async def models(vault: VaultDep):
    listed = await blocking(vault.llm_models)
    return json_response({"object": "list", "data": listed})


@router.get("/v1/models/{model_id:path}")
async def model(model_id: str, vault: VaultDep, exchanges: ExchangesDep):
    # What client.models.retrieve() asks: the configured model, or one the upstream serves.
    listed = {m["id"]: m for m in await blocking(vault.llm_models)}
    if model_id in listed or model_id == exchanges.configured_model:
        return json_response({"object": "model", "created": 0, "owned_by": "memvault",
                              **listed.get(model_id, {}), "id": model_id})
    raise ApiError(404, f"no model {model_id!r}: the upstream serves {', '.join(sorted(listed)) or 'none'} and "
                        f"llm_model is {exchanges.configured_model!r}", "model", kind="not_found_error",
                   code="model_not_found")


@router.post("/v1/chat/completions")
async def chat_completions(request: Request, options: OptionsDep, exchanges: ExchangesDep):
    call = parse_chat(await json_object(request), request.headers, options.conversation)
    name = await exchanges.model_for(call.model)
    if name != call.model:  # a model the upstream does not serve (or none named): the configured one
        call.forward.body = {**call.forward.body, "model": name}
    if call.stream:
        return await serving.stream(exchanges, call, error_event)
    return await serving.complete(exchanges, call, request)


def parse_chat(body: dict, headers, default_conversation: str) -> ChatCall:
    """The request checked (what is wrong is the client's, said with the field's name) and made a ChatCall
    whose `forward` is the request as it came: nothing in it is changed here."""
    messages = serving.checked_messages(body, ROLES)
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
    if body.get("n", 1) not in (1, None):
        raise ApiError(400, "n must be 1: memvault serve stores one reply per message", "n")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false", "stream")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model must be a string", "model")
    for name, kind in SAMPLING.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)):
            raise ApiError(400, f"{name} has the wrong type (got {json.dumps(value)[:40]})", name)
    forward = upstream.Forward(upstream.OPENAI_CHAT, body, at, stream, tool_round=at != len(messages) - 1)
    return ChatCall(text, conversation_of(body, headers, default_conversation), stream, model, forward,
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


def error_event(failure: BaseException, root) -> bytes:
    """A failure after the stream began, OpenAI's way: an error event (then the stream ends)."""
    failed = as_api_error(failure, root)
    body = error_body(failed.message, failed.kind, failed.param, failed.code)
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()
