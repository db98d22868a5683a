"""What the page's routes share (faces/routes_page.py; docs/design.md, "The library API and its faces"): who
may look (the bind and key rules of serve's API), the CSRF token every change carries, the forms and
queries read against the request definitions (request_options.py, through faces/shapes.py), and the
rendering (Jinja2 templates shipped in memvault/faces/page/, autoescaped: a memory holding `<script>` is
text).

Safety, in the order a request meets it:
- serve's Guard lets the page's paths through to here (`handles`), which checks the key itself, so that a
  browser without it gets the login form instead of a JSON refusal.
- Host: without a key serve binds a loopback address only (serve.check_bind); a request naming another
  host (a web page that rebinds its own name to 127.0.0.1) is refused, so no other site reads the page.
- Key (serve_api_key set): entered once in the login form, kept in an HttpOnly, SameSite=Strict cookie
  (an HMAC of the key, not the key); `Authorization: Bearer <key>` is taken too.
- Changes: POST only (a GET changes nothing), each form carrying a token that is an HMAC of the browser's
  session cookie under a secret of this server's; a form without it, or from another origin, is refused
  (403) before the library is called.
- Responses: a Content-Security-Policy that runs no inline script and loads nothing from elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, quote, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError

from memvault.errors import answer_for, validation_problem
from memvault.request_options import Request as Definition

HERE = Path(__file__).resolve().parent / "page"
SESSION_COOKIE, KEY_COOKIE, SAID_COOKIE = "memvault_session", "memvault_key", "memvault_said"
KEY_DAYS = 30
# The page's own paths (serve's Guard hands these to the page, which asks for the key itself).
PREFIXES = ("/search", "/memory/", "/review", "/changes", "/undo", "/conversations", "/login", "/static/")
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def handles(path: str) -> bool:
    """Whether `path` is the page's: its routes check the key themselves (a login form, not a 401)."""
    return path == "/" or path.startswith(PREFIXES)


# -- the templates ---------------------------------------------------------------------------------

_ENV = None
_ENV_LOCK = threading.Lock()


def templates():
    """The Jinja2 environment of the page's templates, made once, autoescaping every template."""
    global _ENV
    with _ENV_LOCK:
        if _ENV is None:
            import jinja2

            env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")),
                                     autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                                     lstrip_blocks=True, auto_reload=False)
            env.filters["day"] = lambda value: str(value)[:10]
            env.filters["moment"] = lambda value: str(value)[:19].replace("T", " ")
            env.filters["short"] = lambda value, n=8: str(value or "")[:n]
            env.filters["number"] = lambda value, digits=3: "–" if value is None else f"{value:.{digits}f}"
            env.filters["first_line"] = first_line
            _ENV = env
    return _ENV


def first_line(text: str, width: int = 160) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


STATIC = {"page.css": "text/css; charset=utf-8", "page.js": "text/javascript; charset=utf-8"}


# -- who may look -----------------------------------------------------------------------------------

_SECRET_LOCK = threading.Lock()


def server_secret(request: Request) -> bytes:
    """This server's secret for session tokens and the notices it carries over a redirect (made at its first
    page; a form from before a restart is refused, and says to reload)."""
    state = request.app.state
    with _SECRET_LOCK:
        if getattr(state, "page_secret", None) is None:
            state.page_secret = secrets.token_bytes(32)
        return state.page_secret


def key_cookie_value(api_key: str) -> str:
    return hmac.new(api_key.encode(), b"memvault page key", hashlib.sha256).hexdigest()


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class PageExit(Exception):
    """A response that ends the request early (a redirect to the login form, a refusal)."""

    def __init__(self, response: Response):
        super().__init__()
        self.response = response


@dataclass
class Page:
    """One request of the page: the vault, serve's options, the browser's session and its CSRF token,
    what is carried over a redirect (`said`), and the response's cookies."""

    request: Request
    vault: Any
    options: Any
    session: str
    token: str
    new_session: bool = False
    said: list[str] = field(default_factory=list)
    undo: str | None = None  # the commit the notice's change made: an Undo button beside it
    started: float = field(default_factory=time.perf_counter)
    library_s: float = 0.0

    # -- rendering ---------------------------------------------------------------------------------
    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        from memvault import __version__

        html = templates().get_template(template).render(
            page=self, vault_root=str(self.vault.root), version=__version__, path=self.request.url.path,
            shown=self.shown, **context)
        return self.finish(HTMLResponse(html, status_code=status))

    def shown(self, text: Any) -> str:
        """A memory's text as the page shows it: each secret as its placeholder (Memvault.redact)."""
        return self.vault.redact(str(text)) if text else ""

    def finish(self, response: Response) -> Response:
        response.headers.update(HEADERS)
        if self.new_session:
            response.set_cookie(SESSION_COOKIE, self.session, httponly=True, samesite="strict", path="/")
        if self.said or self.request.cookies.get(SAID_COOKIE):
            response.delete_cookie(SAID_COOKIE, path="/", httponly=True, samesite="strict")
        spent = (time.perf_counter() - self.started) * 1000
        response.headers["Server-Timing"] = f"library;dur={self.library_s * 1000:.1f}, page;dur={spent:.1f}"
        return response

    def redirect(self, to: str, said: list[str] | None = None, undo: str | None = None) -> Response:
        """303 to `to` (a GET: reloading it changes nothing), carrying a notice in a signed cookie."""
        response = RedirectResponse(to, status_code=303)
        if said:
            response.set_cookie(SAID_COOKIE, sign(server_secret(self.request), said, undo), max_age=120,
                                httponly=True, samesite="strict", path="/")
        response.headers.update(HEADERS)
        if self.new_session:
            response.set_cookie(SESSION_COOKIE, self.session, httponly=True, samesite="strict", path="/")
        return response

    # -- calling the library -----------------------------------------------------------------------
    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A library call on a worker thread (the event loop goes on answering), timed."""
        from memvault.faces.http import blocking

        began = time.perf_counter()
        try:
            return await blocking(fn, *args, **kwargs)
        finally:
            self.library_s += time.perf_counter() - began


def sign(secret: bytes, said: list[str], undo: str | None) -> str:
    import json

    data = base64.urlsafe_b64encode(json.dumps({"said": said, "undo": undo}).encode()).decode()
    return data + "." + hmac.new(secret, data.encode(), hashlib.sha256).hexdigest()[:32]


def unsign(secret: bytes, value: str | None) -> tuple[list[str], str | None]:
    import json

    if not value or "." not in value:
        return [], None
    data, _, mac = value.rpartition(".")
    if not hmac.compare_digest(mac, hmac.new(secret, data.encode(), hashlib.sha256).hexdigest()[:32]):
        return [], None
    try:
        found = json.loads(base64.urlsafe_b64decode(data.encode()))
        return [str(s) for s in found.get("said", [])], found.get("undo")
    except ValueError:
        return [], None


def refusal(request: Request, status: int, message: str) -> Response:
    """A page that says no, in HTML (no session needed to read it)."""
    html = templates().get_template("refused.html").render(status=status, message=message, path=request.url.path)
    response = HTMLResponse(html, status_code=status)
    response.headers.update(HEADERS)
    return response


def enter(request: Request) -> Page:
    """The page's checks for every request (the module's docstring): the Host, the key, the session."""
    vault, options = request.app.state.vault, request.app.state.options
    api_key = options.api_key
    host = _host_name(request.headers.get("host", ""))
    if not api_key and host not in LOOPBACK_NAMES and host != options.host.strip("[]"):
        raise PageExit(refusal(request, 403, f"refused: this page answers to its own address only (127.0.0.1, "
                                             f"localhost), not to {host or 'no host'!r}"))
    if api_key and request.url.path != "/login" and not request.url.path.startswith("/static/"):
        cookie = request.cookies.get(KEY_COOKIE, "")
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if not (hmac.compare_digest(cookie.encode(), key_cookie_value(api_key).encode())
                or (scheme.lower() == "bearer" and hmac.compare_digest(bearer.strip().encode(), api_key.encode()))):
            where = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            if request.method == "GET":
                raise PageExit(RedirectResponse(f"/login?next={quote(where, safe='')}", status_code=303))
            raise PageExit(refusal(request, 401, "refused: this server wants its key (enter it at /login)"))
    secret = server_secret(request)
    session = request.cookies.get(SESSION_COOKIE) or ""
    new = len(session) != 43
    if new:
        session = secrets.token_urlsafe(32)
    token = hmac.new(secret, b"csrf " + session.encode(), hashlib.sha256).hexdigest()
    page = Page(request, vault, options, session, token, new_session=new)
    page.said, page.undo = unsign(secret, request.cookies.get(SAID_COOKIE))
    return page


async def posted(request: Request, page: Page) -> dict[str, list[str]]:
    """A change's form (application/x-www-form-urlencoded: every field a list of its values), once its
    CSRF token and origin are checked; a refusal (403) otherwise, the library not called."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin.rstrip("/") != own:
            raise PageExit(refusal(request, 403, f"refused: a change sent from {origin}, not from this page"))
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise PageExit(refusal(request, 403, "refused: a change sent from another site"))
    raw = (await request.body()).decode("utf-8", "replace")
    form: dict[str, list[str]] = {}
    for name, value in parse_qsl(raw, keep_blank_values=True):
        form.setdefault(name, []).append(value.replace("\r\n", "\n"))  # a textarea's line ends, as HTML sends them
    sent = (form.get("csrf") or [""])[-1]
    if page.new_session or not hmac.compare_digest(sent.encode(), page.token.encode()):
        raise PageExit(refusal(request, 403, "refused: this form's token does not match your session (a form "
                                             "from another site, or from before the server restarted): reload "
                                             "the page and try again; nothing was changed"))
    return form


class PageRoute(APIRoute):
    """The page's routes: a PageExit is its response; a library failure is a page that says it in the
    library's words, with the status of the one error table (errors.ERROR_TABLE)."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except PageExit as exc:
                return exc.response
            except Exception as exc:
                failure = answer_for(exc)
                if not failure.expected:
                    raise  # a bug: serve's handler logs its traceback
                return refusal(request, failure.answer.status, failure.message)

        return run


# -- forms and queries, from the request definitions ------------------------------------------------

LABELS = {"query": "Search for", "top_k": "Results", "kinds": "Kinds", "tags": "Tags", "since": "Since",
          "until": "Until", "as_of": "As of", "all_conversations": "Every conversation", "conversation": "Conversation",
          "limit": "Per page", "deleted": "Deleted ones instead", "rerank": "Rerank (cross-encoder)",
          "recency_weight": "Recency weight", "mmr_lambda": "MMR λ (1 = no diversity)", "threshold": "Threshold",
          "retriever": "Retriever", "relevance_floor": "Relevance floor", "session_weight": "Session weight",
          "now": "Clock (now)", "max_changes": "Changes shown per commit", "episodes": "Episodes shown"}


@dataclass
class Control:
    """One labelled control of a form, made from an option of a request definition."""

    name: str
    label: str
    help: str
    widget: str  # text, number, checkbox, select, checks
    value: Any = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    step: str = "any"

    @property
    def id(self) -> str:
        return "f-" + self.name.replace("_", "-")


def controls(definition: Definition, values: dict[str, Any], names: tuple[str, ...] | None = None,
             leave: tuple[str, ...] = ()) -> list[Control]:
    """The page's controls for a definition's options (those named, in that order; else all but `leave`)."""
    offered = {mine.name: mine for _, mine in definition.at("page")}
    made = []
    for name in names or tuple(offered):
        option = offered.get(name)
        if option is None or name in leave or name == "cursor":
            continue
        value = values.get(name, option.default)
        if option.type is bool:
            widget = "checkbox"
        elif option.choices:
            widget = "checks" if option.many else "select"
        elif option.type in (int, float):
            widget = "number"
        else:
            widget = "text"
        if option.many and not option.choices and isinstance(value, list):
            value = ", ".join(value)
        made.append(Control(name, LABELS.get(name, name.replace("_", " ").capitalize()), option.help, widget,
                            value if value is not None else "", option.choices, option.ge, option.le,
                            "1" if option.type is int else "any"))
    return made


def read_query(model, request: Request) -> tuple[Any, str | None]:
    """The request's query as `model` (a pydantic model of a definition at the page: shapes.model_for), or
    the model's defaults and the problem in one sentence. A blank field is not given; a list of words
    (tags) may be given comma-separated; a checkbox sends a hidden "false" before its "true"."""
    return read_values(model, {name: request.query_params.getlist(name) for name in request.query_params})


def read_values(model, given: dict[str, list[str]]) -> tuple[Any, str | None]:
    fields = model.model_fields
    data: dict[str, Any] = {}
    for name, values in given.items():
        if name not in fields:
            continue
        annotation = str(fields[name].annotation)
        values = [v.strip() for v in values]
        if "list" in annotation:
            items = [part.strip() for v in values for part in (v.split(",") if "Literal" not in annotation else [v])]
            items = [i for i in items if i]
            if items:
                data[name] = items
        elif values and values[-1] != "":
            data[name] = values[-1]
    try:
        return model.model_validate(data), None
    except ValidationError as exc:
        return model.model_validate({}), validation_problem(exc)


def next_url(request: Request, **changes: Any) -> str:
    """This page's URL with some query parameters changed (None: dropped)."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in changes]
    params += [(k, str(v)) for k, v in changes.items() if v is not None]
    from urllib.parse import urlencode

    query = urlencode(params)
    return request.url.path + (f"?{query}" if query else "")


def safe_next(target: str | None) -> str:
    """Where the login form sends the browser on: a path of this server only (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or urlsplit(target).netloc:
        return "/"
    return target
