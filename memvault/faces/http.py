"""What serve's routers share (docs/design.md, "The library API and its faces"): the refusal (ApiError) and
the error mapping read from the one table (errors.ERROR_TABLE), JSON responses, a request body or query
read and checked against its model (built from the request definitions: faces/shapes.py) in serve's
own error shape, and the vault, the server's options and its exchanges as FastAPI dependencies.

A router module (routes_memories.py, routes_openai.py, one per face that rides on serve):

    router = APIRouter()

    @router.post("/v1/memories/search", openapi_extra=shapes.body_schema(SearchBody))
    async def search(vault: VaultDep, options: OptionsDep, body: SearchBody = Depends(body_of(SearchBody))):
        asked = SEARCH.library_args("serve", dict(body))
        return json_response((await blocking(vault.search, **asked)).to_json())

and serve.build_app includes it (`app.include_router`).
"""

from __future__ import annotations

import hmac
import json
from typing import Annotated, Any, Callable

import anyio
from fastapi import Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from memvault.errors import UpstreamAnswered, answer_for, for_client, validation_problem

# Anthropic's error `type` of a status, for a refusal a face makes itself (the table's column says it
# for the library's failures: errors.ERROR_TABLE).
ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                   404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
                   429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}


class ApiError(Exception):
    """A refusal with its HTTP status, in OpenAI's error shape (`kind`: its `type`), or in Anthropic's
    on the Messages face (`anthropic_kind`: its `type`, by default the status's)."""

    def __init__(self, status: int, message: str, param: str | None = None, kind: str = "invalid_request_error",
                 code: str | None = None, retry: bool | None = None, anthropic_kind: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = status, message, param, kind, code
        self.retry = retry  # False: a retry cannot help (the header x-should-retry, which openai clients obey)
        self.anthropic_kind = anthropic_kind or ANTHROPIC_TYPES.get(status, "api_error")


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def anthropic_error_body(message: str, kind: str) -> dict:
    """Anthropic's error shape (its SDK reads `error.type` and `error.message`)."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def speaks_anthropic(path: str, headers) -> bool:
    """Whether a request is one of the Anthropic Messages face's (routes_anthropic.py): its paths, and
    the model list asked with an anthropic-version header (OpenAI's has the same path)."""
    return path.startswith("/v1/messages") or (path.startswith("/v1/models") and "anthropic-version" in headers)


def as_api_error(exc: BaseException, root=None) -> ApiError:
    """A failure as the HTTP status a client understands (errors.ERROR_TABLE); its message is the
    library's one line (an LLM failure names the upstream URL and never the key), without the place of
    the vault `root` on the server's disk (errors.for_client)."""
    if isinstance(exc, ApiError):
        return exc
    failure = answer_for(exc)
    answer = failure.answer
    return ApiError(answer.status, for_client(failure.message, root), failure.param, kind=answer.openai_type,
                    code=answer.code, retry=answer.retry, anthropic_kind=answer.anthropic_type)


def carries_key(headers, api_key: str | None) -> str | None:
    """The header that carries serve's key (`authorization`: Bearer <key>; `x-api-key`, what an Anthropic
    client sends), or None. An Anthropic client's other credentials go on to its upstream; this one not."""
    if not api_key:
        return None
    scheme, _, key = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(key.strip().encode(), api_key.encode()):
        return "authorization"
    if hmac.compare_digest((headers.get("x-api-key") or "").strip().encode(), api_key.encode()):
        return "x-api-key"
    return None


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None, background=None) -> Response:
    return Response(json.dumps(data, ensure_ascii=False, default=str), status_code=status, headers=headers,
                    media_type="application/json", background=background)


def refusal(exc: ApiError) -> Response:
    headers = {"x-should-retry": "false"} if exc.retry is False else None
    return json_response(error_body(exc.message, exc.kind, exc.param, exc.code), exc.status, headers=headers)


def refusal_for(request: Request, exc: BaseException, root=None) -> Response:
    """A failure as the response its face gives: on the Anthropic face, an error the upstream answered
    as it came (status, body, headers such as retry-after), memvault's own in Anthropic's shape; else
    OpenAI's (`refusal`)."""
    if not speaks_anthropic(request.url.path, request.headers):
        return refusal(as_api_error(exc, root))
    if isinstance(exc, UpstreamAnswered) and exc.status and not exc.event:
        return Response(exc.body, status_code=exc.status, media_type=exc.content_type, headers=exc.headers)
    failure = as_api_error(exc, root)
    headers = {"x-should-retry": "false"} if failure.retry is False else None
    return json_response(anthropic_error_body(failure.message, failure.anthropic_kind), failure.status,
                         headers=headers)


def checked(model: type[BaseModel], body: dict) -> Any:
    """The body as the model, or a 400 naming each bad field in one sentence."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]["loc"]
        raise ApiError(400, validation_problem(exc), ".".join(str(p) for p in first) or None) from None


async def json_object(request: Request) -> dict:
    """The request body as a JSON object, whatever its content type says (curl -d sends form's)."""
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


def body_of(model: type[BaseModel]) -> Callable[..., Any]:
    """A dependency: the request's JSON body checked against `model` (a 400 in serve's shape; the
    route says the schema with `openapi_extra=shapes.body_schema(model)`)."""

    async def read(request: Request) -> Any:
        return checked(model, await json_object(request))

    return read


def query_of(model: type[BaseModel]) -> Callable[..., Any]:
    """A dependency: the request's query checked against `model`; a list field is given once per
    value (`?kinds=fact&kinds=note`). The route says the schema with
    `openapi_extra={"parameters": shapes.query_parameters(model)}`."""
    lists = {name for name, info in model.model_fields.items() if "list" in str(info.annotation)}

    async def read(request: Request) -> Any:
        asked = {name: (request.query_params.getlist(name) if name in lists else value)
                 for name, value in request.query_params.items()}
        return checked(model, asked)

    return read


async def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A library call on a worker thread (the event loop goes on answering)."""
    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))


def vault_of(request: Request) -> Any:
    return request.app.state.vault


def options_of(request: Request) -> Any:
    return request.app.state.options


def exchanges_of(request: Request) -> Any:
    return request.app.state.exchanges


VaultDep = Annotated[Any, Depends(vault_of)]  # the open Memvault
OptionsDep = Annotated[Any, Depends(options_of)]  # serve.ServeOptions
ExchangesDep = Annotated[Any, Depends(exchanges_of)]  # serving.Exchanges: the chats under way, their upkeep
