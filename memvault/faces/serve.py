"""`memvault serve`: an OpenAI-compatible memory proxy over HTTP (docs/design.md, 11).

A client that speaks OpenAI's chat-completions protocol (Open WebUI, the `openai` package, an editor
plugin, curl) points its base URL here instead of at the model, and its conversations gain long-term
memory. A face, like the CLI and `memvault mcp`: each route parses its input, makes the library call
(`Memvault.chat` with the client's history, `search`, `add`, `get`, `remove`, `llm_models`) and renders
the result, in OpenAI's shapes or in those of the CLI's `--json`. The routes are routers, one module
each (routes_openai.py, routes_memories.py; what they share: http.py, serving.py); this module puts
them together (`build_app`: a new face on serve is one more `include_router`) and runs the server,
its start and stop those of every long-lived face (lifecycle.py).

- The vault is opened once with watch=True and warmed before the port answers (models, index,
  litellm), so requests pay for none of it and see hand edits and other processes' writes.
- Requests run concurrently: blocking library calls run on worker threads; a streamed reply is read
  by a thread of its own, whose pieces the event loop sends on as they come. The vault lock is held
  only inside the library's short writes, never while the model answers (docs/design.md, 9).
- The response ends as soon as the model's reply does; both turns are stored and committed meanwhile
  (`ChatTurn.on_reply`). The memory upkeep of a turn (extraction, reconciliation, summary) runs
  after that, one turn at a time on one worker thread, so a client never waits for it.
- A client that hangs up mid-reply: what arrived is stored, marked partial (`ChatTurn.close`).
- SIGTERM, SIGHUP and SIGINT (also when the process started with SIGINT ignored: the rule of every
  long-running command, memvault/store/signals.py) stop it cleanly: in-flight
  requests get a few seconds, then the upkeep a few more; replies still waiting for the model are
  stored as they are (`ChatTurn.abandon`); the process takes the vault lock, so that none of its
  threads is half way through a write, and leaves with exit code 0.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import uvicorn
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from memvault import __version__
from memvault.errors import MemvaultError, UsageError, answer_for
from memvault.faces import page_kit, routes_anthropic, routes_memories, routes_openai, routes_page, ui
from memvault.faces.http import (ApiError, anthropic_error_body, as_api_error, carries_key, error_body, json_response,
                                 refusal, refusal_for, speaks_anthropic)
from memvault.faces.lifecycle import LongLived
from memvault.faces.serving import GRACE_REQUESTS, Exchanges
from memvault.store import files, signals

DEFAULT_PORT = 8100
DEFAULT_MAX_BODY_MB = 8.0
SWITCH_INTERVAL = 0.001  # seconds; proxy overhead 52 -> 49 ms (bench/serve.py, 10,000 memories)
# A new face on serve: one more router here. Anthropic's first: its GET /v1/models answers only requests
# with an anthropic-version header, the others go on to OpenAI's.
ROUTERS = (routes_anthropic.router, routes_openai.router, routes_memories.router, routes_page.router)


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    conversation: str = files.DEFAULT_CONVERSATION  # for requests that name none
    max_body: int = int(DEFAULT_MAX_BODY_MB * 1024 * 1024)
    api_key: str | None = None
    access_log: bool = False


# -- the outermost layer ---------------------------------------------------------------------------

class Guard:
    """The outermost layer: the API key (when one is set) and the size of the request body, both
    settled before the application reads anything."""

    def __init__(self, app, max_body: int, api_key: str | None):
        self.app, self.max_body, self.api_key = app, max_body, api_key

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        anthropic = speaks_anthropic(scope["path"], headers)
        if self.api_key and scope["path"] != "/health" and not page_kit.handles(scope["path"]) \
                and not self._authorized(headers):  # the page asks for its key itself
            said = ("missing or wrong API key: send the header `Authorization: Bearer <key>`"
                    + (" or `x-api-key: <key>`" if anthropic else "") + " with the key set in MEMVAULT_SERVE_API_KEY")
            await self._send(send, 401, anthropic_error_body(said, "authentication_error") if anthropic else
                             error_body(said, "invalid_request_error", code="invalid_api_key"))
            return
        too_large = ApiError(413, f"request body over {self.max_body:,} bytes (memvault serve --max-body-mb)",
                             code="request_too_large")
        too_large_body = anthropic_error_body(too_large.message, too_large.anthropic_kind) if anthropic else \
            error_body(too_large.message, too_large.kind, code=too_large.code)
        try:
            declared = int(headers.get("content-length") or 0)
        except ValueError:
            declared = 0
        if declared > self.max_body:
            await self._send(send, 413, too_large_body)
            return
        # The whole body, counted as it comes (a chunked one has no length), then handed on.
        body, more = bytearray(), True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                await self._send(send, 413, too_large_body)
                return
            more = message.get("more_body", False)
        given = False

        async def replay():
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorized(self, headers: dict[str, str]) -> bool:
        return carries_key(headers, self.api_key) is not None

    @staticmethod
    async def _send(send, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})



# -- the application ------------------------------------------------------------------------------

def build_app(vault, options: ServeOptions, notice: Callable[[str], None]) -> tuple[Any, Exchanges]:
    """The ASGI application serving one open vault (a `Memvault`, ideally opened with watch=True),
    and the state of its chats. The FastAPI application is `.app` of what it returns (its
    `openapi()` is the schema of every route, bodies and queries included)."""
    exchanges = Exchanges(vault, options, notice)
    app = FastAPI(title="memvault", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.vault, app.state.options, app.state.exchanges = vault, options, exchanges

    @app.exception_handler(ApiError)
    async def _api_error(request, exc: ApiError):
        return refusal_for(request, exc)

    @app.exception_handler(MemvaultError)
    async def _library_error(request, exc: MemvaultError):
        return refusal_for(request, exc, vault.root)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, exc: StarletteHTTPException):
        if exc.status_code == 404:
            return refusal_for(request, ApiError(
                404, f"no route {request.method} {request.url.path} (memvault serve has /v1/chat/completions, "
                     "/v1/messages, /v1/models, /v1/memories, /v1/stats, /health)", kind="not_found_error",
                code="unknown_route"))
        if exc.status_code == 405:
            allow = allowed_methods(app, request.scope)
            path = request.url.path
            said = f"{request.method} {path}: not allowed; {path} takes {' or '.join(allow)}"
            if path.rstrip("/") == "/v1/memories/search":
                said += " (search is POST /v1/memories/search with a JSON body {\"query\": ...}; GET /v1/memories " \
                        "lists the newest)"
            refused = refusal_for(request, ApiError(405, said, code="method_not_allowed"))
            refused.headers["Allow"] = ", ".join(allow)  # every method of every route of this path
            return refused
        refused = refusal_for(request, ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}"))
        refused.headers.update(exc.headers or {})
        return refused

    @app.exception_handler(Exception)
    async def _unexpected(request, exc: Exception):
        if not answer_for(exc).expected:  # a bug: its traceback on stderr
            import traceback

            notice("memvault: " + "".join(traceback.format_exception(exc)).rstrip())
        return refusal_for(request, exc, vault.root)

    @app.get("/health")
    async def health():
        return json_response({"status": "ok", "version": __version__, "replies_in_flight": exchanges.turns.count(),
                              "upkeep_pending": exchanges.upkeep.pending,
                              # read-your-writes: requests that waited for their conversation's last store, and how long
                              "waited_for_stores": exchanges.storing.waits,
                              "store_wait_ms": round(exchanges.storing.waited * 1000, 1)})

    for router in ROUTERS:
        app.include_router(router)
    return Guard(app, options.max_body, options.api_key), exchanges


def allowed_methods(app, scope) -> list[str]:
    """The methods the routes of a request's path take, all of them (Starlette's 405 names those of the
    first route of the path only: `PUT /v1/memories/{id}` said `Allow: GET`, though DELETE is served)."""
    from starlette.routing import Match

    def routes(of):  # an included router's routes (FastAPI keeps it whole), then the others
        for route in of:
            inner = getattr(getattr(route, "original_router", None), "routes", None)
            yield from routes(inner) if inner is not None else (route,)

    methods: set[str] = set()
    for route in routes(app.router.routes):
        if getattr(route, "methods", None) and route.matches({**scope, "method": "GET"})[0] != Match.NONE:
            methods |= set(route.methods)
    return sorted(methods - {"HEAD"}) or ["GET"]


# -- running it -----------------------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, api_key: str | None) -> None:
    if not is_loopback(host) and not api_key:
        raise UsageError(f"refusing to serve your memories on {host}, an address other machines can reach, "
                         "without a key: set MEMVAULT_SERVE_API_KEY (clients then send `Authorization: Bearer "
                         "<key>`), or bind 127.0.0.1")


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the models load, so that a port in use is said at once."""
    try:
        family, kind, proto, _, _ = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections of such a socket, and
        # without it every response (headers and body: two writes) waited 40 ms for a delayed ACK.
        sock = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        raise MemvaultError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, with memvault's signal handling: the stop signals (signals.py: SIGTERM, SIGHUP,
    SIGINT even when the process started with it ignored, as `cmd &` in a script does) all stop it;
    and after the stop the process leaves with exit code 0 (uvicorn raises the signal again, which
    with SIGTERM's default action would end it with -15)."""

    def __init__(self, config: uvicorn.Config, exchanges: Exchanges):
        super().__init__(config)
        self.exchanges = exchanges

    @contextlib.contextmanager
    def capture_signals(self):
        yield  # run() installed handle_exit already (uvicorn's own would restore and re-raise)

    def handle_exit(self, sig, frame) -> None:
        if self.should_exit:
            self.force_exit = True  # a second signal: stop waiting for connections
        self.should_exit = True
        if self.exchanges.stop_requested is None:
            self.exchanges.stop_requested = time.monotonic()


def log_config(access_log: bool) -> dict:
    """uvicorn's records on stderr (stdout carries nothing), its own chatter only from warnings up."""
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "memvault serve: %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}},
        "loggers": {"uvicorn": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
                    "uvicorn.error": {"level": "WARNING"},
                    "uvicorn.access": {"handlers": ["stderr"], "level": "INFO" if access_log else "WARNING",
                                       "propagate": False}},
    }


def run(life: LongLived, options: ServeOptions) -> None:
    """Serve until a stop signal (signals.py), then stop cleanly and leave the process with exit code 0.
    `life` (lifecycle.LongLived.open) installed the stop signals first: a signal during the warm-up
    then raises signals.Stopped once the step under way is done (at once in a wait for the vault lock),
    and no request is served."""
    vault, notice = life.vault, life.notice
    check_bind(options.host, options.api_key)
    # A request's threads (the event loop, the exchange's, the reply's store) hand the GIL to
    # each other many times; at Python's 5 ms switch interval a hand-off can wait that long.
    sys.setswitchinterval(SWITCH_INTERVAL)
    sock = listen(options.host, options.port)
    # The models, the index and its caches; litellm, which takes seconds to import: now, not during
    # the first request, nor in two request threads at once.
    life.warm_up(llm=True)
    app, exchanges = build_app(vault, options, notice)
    exchanges.life = life
    exchanges.upkeep.queue(life.catch_up)  # what earlier runs left unlearned, before any new turn's upkeep
    config = uvicorn.Config(app, log_config=log_config(options.access_log), access_log=options.access_log,
                            lifespan="off", timeout_graceful_shutdown=GRACE_REQUESTS, timeout_keep_alive=5,
                            server_header=False)
    server = _Server(config, exchanges)
    signals.stop_on_signals(server.handle_exit)  # uvicorn's way from here; a signal that came before: no serving
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    settings = vault.settings
    if not signals.requested.is_set():
        notice(f"memvault serve: listening on http://{shown}:{port}/v1 (vault {vault.root}; "
               f"model {settings.llm_model} at {vault.llm_endpoint()}); the page at http://{shown}:{port}/")
        ui.announce(vault.root, host, port)  # where `memvault ui` finds this vault's page
        server.run(sockets=[sock])
        ui.withdraw(vault.root)
    said = exchanges.stop()  # the vault lock taken and kept (life.hold_lock)
    vault.close()
    notice(said)
    # Threads may still wait for the model (their replies are stored); the native libraries' teardown
    # (ONNX Runtime, LanceDB) can take seconds: leave at once, the vault lock released by the kernel.
    life.exit(0)
