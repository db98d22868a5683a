"""The page: memory in a browser, served by `memvault serve` at `/` (`memvault ui` opens it; docs/design.md,
"The library API and its faces"). A face like the others: each route reads its query or form against a
request definition (request_options.py, built by faces/shapes.py), makes one library call, renders a
Jinja2 template (memvault/faces/page/templates, autoescaped; its CSS and few lines of JavaScript beside
them, nothing from the network). Every page reads without JavaScript; a change is a POST with the CSRF
token (faces/page_kit.py says who may look and change), answered with a redirect to a page to read.

    GET  /                          recent (the timeline: filters, a page at a time, each line's marks)
    GET  /search                    search (explain's columns on demand)
    GET  /memory/{id}               details (text, front matter, links, history with diffs)
    POST /memory/{id}/edit          edit (expected: the text the form showed)
    POST /memory/{id}/remove        remove           POST /memory/{id}/restore    restore
    GET  /review                    review           POST /review                 review_decide
    GET  /changes                   log              POST /undo                   undo
    GET  /conversations             conversations    GET  /conversations/{c}      conversation
    GET, POST /login                the key, once (when serve has one)
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import Field

from memvault.errors import MemvaultError, answer_for
from memvault.faces import shapes
from memvault.faces.page_kit import (HERE, KEY_COOKIE, KEY_DAYS, STATIC, Page, PageExit, PageRoute, controls,
                                     enter, key_cookie_value, next_url, posted, read_query, read_values, refusal,
                                     safe_next)
from memvault.request_options import (CONVERSATION, CONVERSATIONS, DECIDE, DELETE, DETAILS, EDIT, LOG, RECENT,
                                      RESTORE, REVIEW, SEARCH, UNDO)

TimelineQuery = shapes.model_for(RECENT, "page", "TimelineQuery")
SearchQuery = shapes.model_for(SEARCH, "page", "SearchQuery", own={"explain": (bool, Field(False))})
ChangesQuery = shapes.model_for(LOG, "page", "ChangesQuery")
ReviewQuery = shapes.model_for(REVIEW, "page", "ReviewQuery")
ConversationQuery = shapes.model_for(CONVERSATION, "page", "ConversationQuery", leave=("conversation",))
EditForm = shapes.model_for(EDIT, "page", "EditForm", leave=("memory_id",))
RemoveForm = shapes.model_for(DELETE, "page", "RemoveForm", leave=("memory_id",))
DecideForm = shapes.model_for(DECIDE, "page", "DecideForm")
UndoForm = shapes.model_for(UNDO, "page", "UndoForm")

# Each model, by the route that reads it (tests/test_page.py holds them to their definitions).
MODELS = {"GET /": TimelineQuery, "GET /search": SearchQuery, "GET /changes": ChangesQuery, "GET /review": ReviewQuery,
          "GET /conversations/{conversation}": ConversationQuery, "POST /memory/{memory_id}/edit": EditForm,
          "POST /memory/{memory_id}/remove": RemoveForm, "POST /review": DecideForm, "POST /undo": UndoForm}
# The options a form shows first; the others are under "More options".
SEARCH_FIRST = ("query", "conversation", "all_conversations", "kinds", "tags", "since", "until", "top_k")
TIMELINE_FIRST = ("conversation", "kinds", "tags", "since", "until", "deleted")
# The columns of search's explain (as `memvault search --explain` prints them).
EXPLAIN = ("mmr_rank", "dense", "bm25", "rrf", "fused", "match", "logit", "session", "time", "relevance", "recency",
           "score")


async def _enter(request: Request) -> Page:
    return enter(request)


PageDep = Annotated[Page, Depends(_enter)]
router = APIRouter(route_class=PageRoute, include_in_schema=False)


async def _try(page: Page, fn, *args, **kwargs) -> tuple[Any, str | None, int]:
    """A library call whose expected failure the page shows beside its form: (result, problem, status)."""
    try:
        return await page.call(fn, *args, **kwargs), None, 200
    except Exception as exc:  # noqa: BLE001  (a bug is raised again)
        failure = answer_for(exc)
        if not failure.expected:
            raise
        return None, failure.message, failure.answer.status


def _changes(events) -> list[str]:
    from memvault.faces.term import change_lines

    return change_lines([event.to_json() for event in events])


# -- reading ----------------------------------------------------------------------------------------

@router.get("/")
async def timeline(page: PageDep):
    query, problem = read_query(TimelineQuery, page.request)
    listing, status, marks = None, 400 if problem else 200, {}
    if problem is None:
        def run(args):
            found = page.vault.recent(**args)
            return found, found.marks

        result, problem, status = await _try(page, run, RECENT.library_args("page", dict(query)))
        if result is not None:
            listing, marks = result
    more = next_url(page.request, cursor=listing.next_cursor) if listing is not None and listing.next_cursor else None
    asked = dict(query)
    return page.render("timeline.html", status=status, problem=problem, memories=listing or [], marks=marks,
                       more=more, first=next_url(page.request, cursor=None) if asked.get("cursor") else None,
                       fields=controls(RECENT, asked, TIMELINE_FIRST),
                       extra=controls(RECENT, asked, leave=TIMELINE_FIRST), filtered=any(
                           asked.get(name) for name in ("conversation", "kinds", "tags", "since", "until", "as_of")))


@router.get("/search")
async def search(page: PageDep):
    query, problem = read_query(SearchQuery, page.request)
    asked, outcome, status = dict(query), None, 400 if problem else 200
    if problem is None and asked.get("query"):
        outcome, problem, status = await _try(page, page.vault.search, **SEARCH.library_args("page", asked))
    return page.render("search.html", status=status, problem=problem, outcome=outcome, explain=asked["explain"],
                       columns=EXPLAIN, fields=controls(SEARCH, asked, SEARCH_FIRST),
                       extra=controls(SEARCH, asked, leave=SEARCH_FIRST), asked=asked)


@router.get("/memory/{memory_id}")
async def memory(memory_id: str, page: PageDep):
    return await _memory_page(page, memory_id)


async def _memory_page(page: Page, memory_id: str, problem: str | None = None, status: int = 200,
                       text: str | None = None) -> Response:
    found = await page.call(page.vault.details, **DETAILS.library_args("page", {"memory_id": memory_id}))
    return page.render("memory.html", status=status, problem=problem, d=found, m=found.memory,
                       draft=text if text is not None else page.shown(found.memory.text),
                       front=found.memory.front_matter())


@router.get("/review")
async def review(page: PageDep):
    query, problem = read_query(ReviewQuery, page.request)
    items, status = [], 400 if problem else 200
    if problem is None:
        items, problem, status = await _try(page, page.vault.review, **REVIEW.library_args("page", dict(query)))
    return page.render("review.html", status=status, problem=problem, items=items or [],
                       fields=controls(REVIEW, dict(query)), back=next_url(page.request))


@router.get("/changes")
async def changes(page: PageDep):
    query, problem = read_query(ChangesQuery, page.request)
    entries, status = [], 400 if problem else 200
    if problem is None:
        entries, problem, status = await _try(page, page.vault.log, **LOG.library_args("page", dict(query)))
    return page.render("changes.html", status=status, problem=problem, entries=entries or [],
                       fields=controls(LOG, dict(query)))


@router.get("/conversations")
async def conversations(page: PageDep):
    found, problem, status = await _try(page, page.vault.conversations, **CONVERSATIONS.library_args("page", {}))
    return page.render("conversations.html", status=status, problem=problem, conversations=found or [])


@router.get("/conversations/{conversation:path}")
async def conversation(conversation: str, page: PageDep):
    query, problem = read_query(ConversationQuery, page.request)
    view = None
    if problem is None:
        view = await page.call(page.vault.conversation,
                               **CONVERSATION.library_args("page", {**dict(query), "conversation": conversation}))
    return page.render("conversation.html", status=400 if problem else 200, problem=problem, view=view,
                       name=conversation)


# -- changing ----------------------------------------------------------------------------------------

async def _memory_form(page: Page, memory_id: str, model) -> tuple[Any, str | None]:
    """The form of one memory's page (edit, remove), read against its model: (its values, the words typed in
    its text box, None without one); a form that does not read ends the request with the memory's page
    saying why (400), the words kept in the box."""
    form = await posted(page.request, page)
    body, problem = read_values(model, form)
    text = (form.get("text") or [""])[-1] if "text" in model.model_fields else None
    if problem is not None:
        raise PageExit(await _memory_page(page, memory_id, problem, 400, text))
    return body, text


async def _back_form(page: Page, model, definition, call, back: str) -> tuple[str, Any, str | None]:
    """A change from a form that names the page to go back to (review's decisions, undo): (that page, safe,
    `back` by default; the library call's result; what went wrong instead, in the library's words)."""
    form = await posted(page.request, page)
    back = safe_next((form.get("back") or [back])[-1])
    body, problem = read_values(model, form)
    result = None
    if problem is None:
        result, problem, _ = await _try(page, call, **definition.library_args("page", dict(body)))
    return back, result, problem


@router.post("/memory/{memory_id}/edit")
async def edit(memory_id: str, page: PageDep):
    body, text = await _memory_form(page, memory_id, EditForm)
    result, problem, status = await _try(page, page.vault.edit,
                                         **EDIT.library_args("page", {**dict(body), "memory_id": memory_id}))
    if problem is not None:  # the user's words stay in the box, with what went wrong
        return await _memory_page(page, memory_id, problem, status, text)
    if not result.changed:
        return page.redirect(f"/memory/{result.memory.id}", ["Nothing changed: the text is the same."])
    return page.redirect(f"/memory/{result.memory.id}",
                         [f"Edited {result.memory.id[:8]}, committed {(result.commit or '')[:8]}."], undo=result.commit)


@router.post("/memory/{memory_id}/remove")
async def remove(memory_id: str, page: PageDep):
    body, _ = await _memory_form(page, memory_id, RemoveForm)
    removed = await page.call(page.vault.remove, **DELETE.library_args("page", {**dict(body), "memory_id": memory_id}))
    return page.redirect(f"/memory/{removed[0].id}", [f"Removed {m.id[:8]}: {m.text[:120]}" for m in removed])


@router.post("/memory/{memory_id}/restore")
async def restore(memory_id: str, page: PageDep):
    await posted(page.request, page)
    event = await page.call(page.vault.restore, **RESTORE.library_args("page", {"memory_id": memory_id}))
    return page.redirect(f"/memory/{event.memory.id}", _changes([event]))


@router.post("/review")
async def decide(page: PageDep):
    back, outcome, problem = await _back_form(page, DecideForm, DECIDE, page.vault.review_decide, "/review")
    if problem is not None:
        return page.redirect(back, [f"Nothing was done: {problem}"])
    word = {"keep": "Kept", "reject": "Rejected"}.get(outcome.action, outcome.action)
    return page.redirect(back, [f"{word}, committed {(outcome.commit or '')[:8]}:", *_changes(outcome.events)],
                         undo=outcome.commit)


@router.post("/undo")
async def undo(page: PageDep):
    back, result, problem = await _back_form(page, UndoForm, UNDO, page.vault.undo, "/changes")
    if problem is not None:
        return page.redirect(back, [f"Nothing was taken back: {problem}"])
    return page.redirect(back, [f"Took back {result.commit[:8]} ({result.subject}), committed "
                                f"{(result.commit_sha or '')[:8]}:", *_changes(result.events)], undo=result.commit_sha)


# -- the key, and the page's files ------------------------------------------------------------------------

@router.get("/login")
async def login_form(page: PageDep):
    if not page.options.api_key:
        return page.redirect(safe_next(page.request.query_params.get("next")))
    return page.render("login.html", problem=None, next=safe_next(page.request.query_params.get("next")))


@router.post("/login")
async def login(page: PageDep):
    form = await posted(page.request, page)
    target = safe_next((form.get("next") or ["/"])[-1])
    key = (form.get("key") or [""])[-1].strip()
    api_key = page.options.api_key
    if not api_key:
        return page.redirect(target)
    if not hmac.compare_digest(key.encode(), api_key.encode()):
        return page.render("login.html", status=401, problem="That is not this server's key (MEMVAULT_SERVE_API_KEY).",
                           next=target)
    response = page.redirect(target)
    response.set_cookie(KEY_COOKIE, key_cookie_value(api_key), max_age=KEY_DAYS * 86400, httponly=True,
                        samesite="strict", path="/")
    return response


_FILES: dict[str, bytes] = {}


@router.get("/static/{name}")
async def static(name: str, request: Request):
    if name not in STATIC:
        raise PageExit(refusal(request, 404, f"no file {name!r}"))
    if name not in _FILES:
        _FILES[name] = (HERE / "static" / name).read_bytes()
    return Response(_FILES[name], media_type=STATIC[name], headers={"Cache-Control": "max-age=600",
                                                                    "X-Content-Type-Options": "nosniff"})


# a page that is not one of the page's: serve's own answer (a JSON 404 naming its routes)
__all__ = ["router", "MODELS", "MemvaultError", "RedirectResponse"]
