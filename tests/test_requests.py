"""One definition per request (memvault/request_options.py): the library call, the CLI command, serve's
request body or query and the MCP tool of each request are built from it, and held to it here; the
error table (errors.ERROR_TABLE) is the one mapping every face reads. An option added to the definition
reaches every face (test_a_new_option_reaches_every_face), and one the library does not take fails here."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import typing

import anyio
import pytest
import typer

import memvault
from conftest import REPO
from memvault import errors
from memvault.api import Memvault
from memvault.faces.cli import app
from memvault.request_options import FACES, REQUESTS, SEARCH, SEARCH_KINDS
from memvault.store import files


def cli_params(command: str) -> set[str]:
    group = typer.main.get_command(app)
    name = command.removeprefix("memvault ")
    return {p.name for p in group.commands[name].params} | {"ctx"}  # typer hides the Context parameter


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


def _empty(value) -> bool:
    return value is None or value == () or value == []


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.call)
def test_every_library_option_is_defined_once(request_):
    """Names, order and defaults: the definition's are the library call's."""
    signature = inspect.signature(getattr(Memvault, request_.call))
    taken = [p for name, p in signature.parameters.items() if name != "self"]
    assert [p.name for p in taken] == [o.name for o in request_.options], \
        f"Memvault.{request_.call} and request_options disagree"
    for parameter, option in zip(taken, request_.options):
        if parameter.default is inspect.Parameter.empty:
            assert option.required, (request_.call, option.name)
        elif option.many:
            assert _empty(parameter.default) and _empty(option.default), (request_.call, option.name)
        else:
            assert parameter.default == option.default, (request_.call, option.name)
        for face in FACES:
            why = option.left_out(face)
            assert why is None or why.strip(), (request_.call, option.name, face)


@pytest.mark.parametrize("request_", [r for r in REQUESTS if "cli" in r.where], ids=lambda r: r.call)
def test_the_cli_takes_every_option(request_):
    assert cli_params(request_.where["cli"]) == request_.expected("cli")


@pytest.mark.parametrize("request_", [r for r in REQUESTS if "serve" in r.where], ids=lambda r: r.call)
def test_serve_takes_every_option(request_):
    from memvault.faces.routes_memories import MODELS

    route = request_.where["serve"]
    model = MODELS[route]
    assert model.request is request_
    in_path = set(re.findall(r"{(\w+)}", route))
    assert set(model.model_fields) | in_path == request_.expected("serve")


def test_the_mcp_tools_take_every_option(vault_dir):
    schemas = mcp_schemas(vault_dir)
    for request_ in REQUESTS:
        if "mcp" in request_.where:
            assert set(schemas[request_.where["mcp"]]["properties"]) == request_.expected("mcp"), request_.call


def test_every_face_offers_every_kind_of_search(vault_dir):
    """serve's search body lacked `episode` (and relevance_floor): drift this catches. The kinds come from
    one place (request_options.SEARCH_KINDS); the files map each to its roles."""
    from memvault.faces.routes_memories import SearchBody

    assert tuple(files.SEARCH_KINDS) == SEARCH_KINDS
    group = typer.main.get_command(app)
    [kind] = [p for p in group.commands["search"].params if p.name == "kind"]
    (choice,) = typing.get_args(kind.type_descriptor.annotation)
    assert tuple(c.value for c in choice) == SEARCH_KINDS
    (item,) = typing.get_args(SearchBody.model_fields["kinds"].annotation)
    assert typing.get_args(item) == SEARCH_KINDS
    schema = mcp_schemas(vault_dir)["search_memory"]["properties"]["kind"]
    assert {"enum": list(SEARCH_KINDS), "type": "string"} in schema["anyOf"]


def test_each_face_is_named_for_each_request():
    for request_ in REQUESTS:
        assert set(request_.where) <= set(FACES), request_.call
    assert SEARCH.expected("serve") >= {"relevance_floor", "kinds", "conversation_id"}


NEW_OPTION = r"""
import json, sys, anyio
import memvault, memvault.request_options as r
r.SEARCH = r.SEARCH.with_option(r.Option("throwaway_knob", float, "A throwaway knob for the test.", ge=0, le=2))
from typer.testing import CliRunner
from memvault.faces.cli import app
help_text = CliRunner().invoke(app, ["search", "--help"]).output
from memvault.faces.serve import ServeOptions, build_app
vault = memvault.open_vault(sys.argv[1])
guard, _ = build_app(vault, ServeOptions(), print)
schema = guard.app.openapi()["paths"]["/v1/memories/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
from mcp import Client
from memvault.faces.mcp_server import build_server
async def tools():
    async with Client(build_server(vault)) as client:
        return {t.name: t.input_schema for t in (await client.list_tools()).tools}
mcp = anyio.run(tools)["search_memory"]["properties"]
print(json.dumps({"help": help_text, "serve": schema["properties"].get("throwaway_knob"),
                  "mcp": mcp.get("throwaway_knob")}))
"""


def test_a_new_option_reaches_every_face(tmp_path):
    """One option added to one definition (as a new library parameter would be): the CLI's --help, serve's
    OpenAPI schema and the MCP tool's input schema all have it, with its bounds and help words, and no
    face was touched. A fresh process: each face builds its options when it is imported."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", NEW_OPTION, str(tmp_path / "vault")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert "--throwaway-knob" in seen["help"] and "A throwaway knob for the test." in seen["help"]
    assert seen["serve"]["description"] == "A throwaway knob for the test."
    assert {"type": "number", "minimum": 0, "maximum": 2} in seen["serve"]["anyOf"]
    assert seen["mcp"]["description"] == "A throwaway knob for the test."
    assert {"type": "number", "minimum": 0, "maximum": 2} in seen["mcp"]["anyOf"]


# -- one error table ----------------------------------------------------------------------------------

FAILURES = [
    errors.NotFound("no memory with id 'abcd'"),
    errors.UsageError("since is not a date", params="since"),
    errors.SettingsError("default_top_k must be a whole number"),
    errors.NothingGiven("nothing to add: the text is empty", params="text"),
    errors.AlreadyDeleted("memory abcd is deleted already"),
    errors.LockTimeout("another memvault process held the vault lock"),
    errors.LLMTimeout("the LLM at http://x did not answer in 60 s"),
    errors.LLMError("the LLM at http://x refused the option", status=400),
    errors.LLMError("the LLM at http://x failed", status=503),
    errors.LLMError("the LLM at http://x is unreachable"),
    errors.UpstreamAnswered("Anthropic endpoint http://x answered HTTP 529: overloaded", status=529, body=b"{}"),
    errors.VaultStateError("a merge is in progress"),
    errors.IndexUnreadable("the index under .memvault/ is unreadable"),
    PermissionError(13, "Permission denied", "/vault/entries"),
    RuntimeError("lance error: not found, /a/b.rs:1:2"),
]


@pytest.mark.parametrize("exc", FAILURES, ids=lambda e: type(e).__name__)
def test_every_face_maps_a_failure_from_the_one_table(exc):
    """The CLI's exit code, serve's status, type and words, and the MCP tool's words are the table's,
    and each face says the same line."""
    from memvault.faces.http import as_api_error
    from memvault.faces.mcp_server import _failure

    failure = errors.answer_for(exc)
    assert failure.expected and failure.message and "\n" not in failure.message
    answered = as_api_error(exc)
    assert (answered.status, answered.kind, answered.code, answered.message, answered.anthropic_kind) == (
        failure.answer.status, failure.answer.openai_type, failure.answer.code, failure.message,
        failure.answer.anthropic_type)
    assert str(_failure(exc)) == failure.message
    if isinstance(exc, errors.MemvaultError):
        assert type(exc).exit_code == failure.answer.exit_code  # the class's own says the same


def test_the_cli_exits_with_the_tables_code(vault_dir):
    from typer.testing import CliRunner

    done = CliRunner().invoke(app, ["--vault", str(vault_dir), "search", "x", "--since", "not a date"])
    assert done.exit_code == errors.answer_for(errors.UsageError("x")).answer.exit_code == 2
    assert "--since" in done.stderr
    missing = CliRunner().invoke(app, ["--vault", str(vault_dir), "show", "abcd1234"])
    assert missing.exit_code == 1 and missing.stderr.startswith("memvault: error: ")


def test_a_bug_is_no_row_of_the_table():
    failure = errors.answer_for(KeyError("x"))
    assert not failure.expected and failure.answer.status == 500
