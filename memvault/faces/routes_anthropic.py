"""Anthropic's Messages protocol on serve (docs/design.md, "The library API and its faces"; section 11):
`POST /v1/messages` (`Memvault.chat` with the client's request, through serving.Exchanges, as the OpenAI
face does), `POST /v1/messages/count_tokens` and `GET /v1/models[/{id}]` asked with an anthropic-version
header (`Memvault.relay`: handed on, nothing remembered). What Claude Code and the `anthropic` SDK call
with ANTHROPIC_BASE_URL pointed here.

A request is checked and made a ChatCall (`parse_messages`) whose `forward` is the request as it came,
its headers (anthropic-version, anthropic-beta, the client's key...) and its query among it, for the
upstream of the settings (anthropic_base_url; store/upstream.ANTHROPIC_MESSAGES): the memory block is
one more `system` block after the client's own, nothing else changed. The upstream's answer goes back as
it came (serving.complete, serving.stream), an error it answered too (http.refusal_for); memvault's own
failures in Anthropic's error shape, mid-stream as an `error` event (`error_event`).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.routing import Match

from memvault.errors import UpstreamAnswered, UsageError
from memvault.faces import serving
from memvault.faces.http import (ApiError, ExchangesDep, OptionsDep, VaultDep, anthropic_error_body, as_api_error,
                                 blocking, carries_key, json_object)
from memvault.faces.serving import ChatCall
from memvault.store import files, upstream

CONVERSATION_HEADER = "x-memvault-conversation"
RETRY_HEADER = "x-stainless-retry-count"  # the anthropic SDK (and claude, built on it) numbers its retries
# `system` as a message (a beta of Anthropic's API that claude uses for its hooks' context), besides
# the user's and the assistant's.
ROLES = {"user", "assistant", "system"}
# Text a client adds to the user's message for the model, not the user's words: claude's reminders.
REMINDER = ("<system-reminder>", "</system-reminder>")


class AnthropicRoute(APIRoute):
    """A route that answers only requests that say they speak Anthropic's protocol (an anthropic-version
    header): GET /v1/models is OpenAI's route too, which answers the others."""

    def matches(self, scope) -> tuple[Match, dict]:
        if not any(name == b"anthropic-version" for name, _ in scope.get("headers", ())):
            return Match.NONE, {}
        return super().matches(scope)


router = APIRouter()
models_router = APIRouter(route_class=AnthropicRoute)


@router.post("/v1/messages")
async def messages(request: Request, options: OptionsDep, exchanges: ExchangesDep):
    call = parse_messages(await json_object(request), request.headers, options.conversation,
                          withheld=_withheld(request, options), query=request.url.query)
    if call.stream:
        return await serving.stream(exchanges, call, error_event)
    return await serving.complete(exchanges, call, request)


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request, vault: VaultDep, options: OptionsDep):
    body = await json_object(request)
    return _as_it_came(await blocking(vault.relay, upstream.ANTHROPIC_MESSAGES, "POST", _path(request), body,
                                      upstream.passed_headers(request.headers, _withheld(request, options))))


@models_router.get("/v1/models")
async def models(request: Request, vault: VaultDep, options: OptionsDep):
    return _as_it_came(await blocking(vault.relay, upstream.ANTHROPIC_MESSAGES, "GET", _path(request), None,
                                      upstream.passed_headers(request.headers, _withheld(request, options))))


@models_router.get("/v1/models/{model_id:path}")
async def model(model_id: str, request: Request, vault: VaultDep, options: OptionsDep):
    return await models(request, vault, options)


router.include_router(models_router)


def _path(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


def _withheld(request: Request, options) -> tuple[str, ...]:
    """The header that carried serve's own key (when one is set): memvault's, not the upstream's."""
    carrier = carries_key(request.headers, options.api_key)
    return (carrier,) if carrier else ()


def _as_it_came(answer: upstream.Answer) -> Response:
    return Response(answer.raw, status_code=answer.status, media_type=answer.content_type, headers=answer.headers)


def parse_messages(body: dict, headers, default_conversation: str, withheld: tuple[str, ...] = (),
                   query: str = "") -> ChatCall:
    """The request checked (what is wrong is the client's, said with the field's name) and made a ChatCall
    whose `forward` is the request as it came, with the client's headers to pass on."""
    messages = serving.checked_messages(body, ROLES)
    texts = [message_text(message.get("content"), f"messages[{number}].content") if message["role"] == "user" else ""
             for number, message in enumerate(messages)]
    # The user's message: the last user message with words of the user's. After it, a tool round (the
    # assistant's tool_use, the client's tool_result blocks: a user message without such words) and
    # system messages (claude's).
    at = max((n for n, text in enumerate(texts) if text.strip()), default=None)
    if at is None:
        raise ApiError(400, "no user message with text: memvault serve answers a user message with memories",
                       "messages")
    system = body.get("system")
    if system is not None and not isinstance(system, (str, list)):
        raise ApiError(400, "system must be a string or a list of text blocks", "system")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false", "stream")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model must be a string naming the model", "model")
    tool_round = any(m["role"] == "assistant" for m in messages[at + 1:])
    forward = upstream.Forward(upstream.ANTHROPIC_MESSAGES, body, at, stream, tool_round=tool_round,
                               headers=upstream.passed_headers(headers, withheld), query=query)
    return ChatCall(texts[at], conversation_of(headers, default_conversation), stream, model, forward,
                    resent=(headers.get(RETRY_HEADER) or "0").strip() not in ("", "0"))


def message_text(content: Any, where: str) -> str:
    """The user's words in a message's content: a string, or its text blocks (images, documents and
    tool results are not words of the user's; neither is a text block that is one whole reminder)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where} must be a string or a list of content blocks", where)
    words = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            continue
        text = block["text"].strip()
        if text.startswith(REMINDER[0]) and text.endswith(REMINDER[1]):
            continue
        words.append(block["text"])
    return "\n".join(words)


def conversation_of(headers, default: str) -> str:
    """The conversation a request names: the X-Memvault-Conversation header (claude sends it with
    ANTHROPIC_CUSTOM_HEADERS), else the server's default."""
    value = headers.get(CONVERSATION_HEADER)
    if not value:
        return default
    try:
        files.check_conversation_id(value)
    except UsageError as exc:
        raise ApiError(400, f"header X-Memvault-Conversation: {exc}", "X-Memvault-Conversation") from None
    return value


def error_event(failure: BaseException, root) -> bytes:
    """A failure after the stream began, Anthropic's way: the upstream's own `error` event as it came,
    else one in its shape saying memvault's words (the SDK raises it; claude says it)."""
    if isinstance(failure, UpstreamAnswered) and failure.event:
        return failure.body
    failed = as_api_error(failure, root)
    body = anthropic_error_body(failed.message, failed.anthropic_kind)
    return f"event: error\ndata: {json.dumps(body, ensure_ascii=False)}\n\n".encode()
