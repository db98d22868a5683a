"""One definition per request (memvault/request_options.py): the library call, the CLI command,
serve's request body and the MCP tool of search, add, recent and log take the same options, or
leave one out by name with a reason. An option added to one place and not the others fails here."""

from __future__ import annotations

import inspect
import typing

import anyio
import pytest
import typer

import memvault
from memvault.store import files
from memvault.api import Memvault
from memvault.faces.cli import app
from memvault.request_options import FACES, REQUESTS, SEARCH


def cli_params(command: str) -> set[str]:
    group = typer.main.get_command(app)
    name = command.removeprefix("memvault ")
    return {p.name for p in group.commands[name].params} | {"ctx"}  # typer hides the Context parameter


def serve_fields(route: str) -> set[str]:
    from memvault.faces import serve

    body = {"POST /v1/memories/search": serve.SearchBody, "POST /v1/memories": serve.AddBody,
            "GET /v1/memories": serve.ListQuery}[route]
    return set(body.model_fields)


def mcp_schemas(vault_dir) -> dict[str, dict]:
    from mcp import Client

    from memvault.faces.mcp_server import build_server

    vault = memvault.open_vault(vault_dir)

    async def main():
        async with Client(build_server(vault)) as client:
            return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    try:
        return anyio.run(main)
    finally:
        vault.close()


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.call)
def test_every_library_option_is_defined_once(request_):
    taken = [name for name in inspect.signature(getattr(Memvault, request_.call)).parameters if name != "self"]
    assert taken == list(request_.options), f"Memvault.{request_.call} and request_options disagree"
    for face, left in request_.left_out.items():
        assert set(left) <= set(request_.options), (face, set(left) - set(request_.options))
        assert all(why.strip() for why in left.values()), face


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.call)
def test_the_cli_takes_every_option(request_):
    assert cli_params(request_.where["cli"]) == request_.expected("cli")


@pytest.mark.parametrize("request_", [r for r in REQUESTS if "serve" in r.where], ids=lambda r: r.call)
def test_serve_takes_every_option(request_):
    assert serve_fields(request_.where["serve"]) == request_.expected("serve")


def test_the_mcp_tools_take_every_option(vault_dir):
    schemas = mcp_schemas(vault_dir)
    for request_ in REQUESTS:
        assert set(schemas[request_.where["mcp"]]["properties"]) == request_.expected("mcp"), request_.call


def test_every_face_offers_every_kind_of_search(vault_dir):
    """serve's search body lacked `episode` (and relevance_floor): drift this catches."""
    kinds = set(files.SEARCH_KINDS)
    from memvault.faces import cli, serve

    assert {k.value for k in cli.SearchKind} == kinds
    (item,) = typing.get_args(serve.SearchBody.model_fields["kinds"].annotation)
    assert set(typing.get_args(item)) == kinds
    schema = mcp_schemas(vault_dir)["search_memory"]["properties"]["kind"]
    assert {"enum": sorted(kinds, key=list(files.SEARCH_KINDS).index), "type": "string"} in schema["anyOf"]


def test_each_face_is_named_for_each_request():
    for request_ in REQUESTS:
        assert set(request_.where) <= set(FACES) and "cli" in request_.where, request_.call
    assert SEARCH.expected("serve") >= {"relevance_floor", "kinds", "conversation_id"}
