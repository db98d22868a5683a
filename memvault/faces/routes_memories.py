"""serve's memory API (docs/design.md, "The library API and its faces"): one library call a route, the
JSON of the CLI's `--json`. Bodies and queries are the request definitions' (request_options.py, built
by faces/shapes.py): an option added there is taken here and said in the OpenAPI schema.

    POST /v1/memories           add (extract: its changes)       GET /v1/memories         recent
    POST /v1/memories/search    search                           GET /v1/memories/{id}    get
    DELETE /v1/memories/{id}    remove                           GET /v1/stats            stats
    GET, POST /v1/memories/review   review, review_keep, review_reject
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from memvault.faces import shapes
from memvault.faces.http import (ApiError, OptionsDep, VaultDep, blocking, body_of, json_response, query_of)
from memvault.request_options import ADD, DELETE, GET, RECENT, REVIEW, SEARCH, STATS

AddBody = shapes.model_for(ADD, "serve", "AddBody", doc="POST /v1/memories: what memvault add takes.")
SearchBody = shapes.model_for(SEARCH, "serve", "SearchBody", doc="POST /v1/memories/search: what memvault search takes.")
ListQuery = shapes.model_for(RECENT, "serve", "ListQuery", doc="GET /v1/memories: what memvault ls takes, newest "
                             "first, a page at a time: `cursor` is the `next_cursor` of the page before.")
ReviewQuery = shapes.model_for(REVIEW, "serve", "ReviewQuery", doc="GET /v1/memories/review: what memvault review lists.")
GetQuery = shapes.model_for(GET, "serve", "GetQuery", leave=("memory_id",))
DeleteQuery = shapes.model_for(DELETE, "serve", "DeleteQuery", leave=("memory_id",))
StatsQuery = shapes.model_for(STATS, "serve", "StatsQuery")


class ReviewBody(BaseModel):
    """POST /v1/memories/review: what `memvault review --keep` / `--reject` take."""

    model_config = ConfigDict(extra="forbid")
    keep: list[str] = []
    reject: list[str] = []
    text: str | None = None
    reason: str | None = None


# Each model, by the route that takes it (tests/test_requests.py holds them to their definitions).
MODELS = {"POST /v1/memories": AddBody, "POST /v1/memories/search": SearchBody, "GET /v1/memories": ListQuery,
          "GET /v1/memories/review": ReviewQuery, "GET /v1/memories/{memory_id}": GetQuery,
          "DELETE /v1/memories/{memory_id}": DeleteQuery, "GET /v1/stats": StatsQuery}

router = APIRouter()


def _query(model) -> dict:
    return {"parameters": shapes.query_parameters(model)}


@router.get("/v1/stats", openapi_extra=_query(StatsQuery))
async def stats(vault: VaultDep, query=Depends(query_of(StatsQuery))):
    stats = await blocking(vault.stats, **STATS.library_args("serve", dict(query)))
    return json_response(stats.to_json())


@router.post("/v1/memories", openapi_extra=shapes.body_schema(AddBody))
async def add(vault: VaultDep, options: OptionsDep, body=Depends(body_of(AddBody))):
    asked = ADD.library_args("serve", dict(body))
    asked.setdefault("conversation", options.conversation)
    added = await blocking(vault.add, **asked)
    # With extract, the changes it made (what `add --extract --json` prints); else the memories.
    return json_response(added.learned.to_json() if body.extract else added.to_json(vault.root))


@router.post("/v1/memories/search", openapi_extra=shapes.body_schema(SearchBody))
async def search(vault: VaultDep, options: OptionsDep, body=Depends(body_of(SearchBody))):
    asked = SEARCH.library_args("serve", dict(body))  # both named: the library's UsageError, a 400
    if not body.all_conversations:
        asked.setdefault("conversation", options.conversation)
    outcome = await blocking(vault.search, **asked)
    return json_response(outcome.to_json())


@router.get("/v1/memories", openapi_extra=_query(ListQuery))
async def listing(vault: VaultDep, query=Depends(query_of(ListQuery))):
    page = await blocking(vault.recent, **RECENT.library_args("serve", dict(query)))
    return json_response({"object": "list", "data": [m.to_json(vault.root) for m in page],
                          "has_more": page.next_cursor is not None, "next_cursor": page.next_cursor})


@router.get("/v1/memories/search")
async def search_by_get():
    raise ApiError(405, "search is POST /v1/memories/search with a JSON body ({\"query\": ...}); "
                        "GET /v1/memories lists the newest", code="method_not_allowed")


@router.get("/v1/memories/review", openapi_extra=_query(ReviewQuery))
async def review_list(vault: VaultDep, query=Depends(query_of(ReviewQuery))):
    items = await blocking(vault.review, **REVIEW.library_args("serve", dict(query)))
    return json_response([item.to_json(vault.root) for item in items])


@router.post("/v1/memories/review", openapi_extra=shapes.body_schema(ReviewBody))
async def review(vault: VaultDep, body=Depends(body_of(ReviewBody))):
    outcome = await blocking(vault.review_decide, keep=body.keep, reject=body.reject, text=body.text,
                             reason=body.reason)  # the rules are the library's
    return json_response(outcome.to_json())


@router.get("/v1/memories/{memory_id}", openapi_extra=_query(GetQuery))
async def get(memory_id: str, vault: VaultDep, query=Depends(query_of(GetQuery))):
    memory = await blocking(vault.get, **GET.library_args("serve", {**dict(query), "memory_id": memory_id}))
    return json_response(memory.to_json(vault.root))


@router.delete("/v1/memories/{memory_id}", openapi_extra=_query(DeleteQuery))
async def remove(memory_id: str, vault: VaultDep, query=Depends(query_of(DeleteQuery))):
    removed = await blocking(vault.remove, **DELETE.library_args("serve", {**dict(query), "memory_id": memory_id}))
    return json_response([m.to_json(vault.root) for m in removed])
