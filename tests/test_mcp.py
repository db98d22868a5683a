"""`memvault mcp`: the vault as an MCP server, through the SDK's own client, in memory and over a
real stdio subprocess started as an agent starts it (`memvault mcp`). The LLM behind `extract`
is the scripted OpenAI-protocol server (tests/fake_llm.py), reached by real litellm."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import pytest

import memvault
from conftest import REPO, git, memvault_command, run_cli, run_memvault, stop_process
from fake_llm import refused_url
from memvault.store import files

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from memvault.faces.mcp_server import build_server  # noqa: E402

TOOLS = ["search_memory", "add_memory", "get_memory", "delete_memory", "recent_memories", "memory_history",
         "vault_stats", "conversation_summary", "review_memories"]
NO = '{"answer": "no"}'


def facts(*texts: str) -> str:
    return json.dumps({"facts": list(texts)})


def with_client(vault_dir: Path, body, **settings):
    """Run `body(client)` against the server of a vault opened as `memvault mcp` opens it (watch=True),
    connected in-process through the SDK's Client."""
    vault = memvault.open_vault(vault_dir, watch=True, **settings)

    async def main():
        async with Client(build_server(vault)) as client:
            return await body(client)

    try:
        return anyio.run(main)
    finally:
        vault.close()


async def call(client, tool: str, **arguments) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refused(client, tool: str, **arguments) -> str:
    """The error result's text, checked to be one line without a traceback."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    [content] = result.content
    assert content.text.startswith(f"Error executing tool {tool}: "), content.text
    assert "\n" not in content.text and "Traceback" not in content.text
    return content.text


async def eventually(check, timeout: float = 10.0):
    """File-system events reach the server a moment after a write; a call soon after sees them."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await anyio.sleep(0.1)


def search_texts(found: dict) -> list[str]:
    return [r["text"] for r in found["results"]]


# -- in memory -----------------------------------------------------------------------------------

def test_tools_have_descriptions_typed_schemas_and_annotations(vault_dir):
    async def body(client):
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = with_client(vault_dir, body)
    assert list(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.annotations.title and tool.output_schema, tool.name
        # The docstring dedented: no line starts with the source's indentation.
        assert not any(line.startswith("    ") for line in tool.description.splitlines()), tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
    search = tools["search_memory"].input_schema
    assert search["required"] == ["query"]
    # No default of its own: none given, the library's default_top_k setting applies (test below).
    assert search["properties"]["top_k"]["default"] is None
    assert {"type": "integer", "minimum": 1, "maximum": 50} in search["properties"]["top_k"]["anyOf"]
    assert {"enum": ["fact", "note", "decision", "turn", "episode"], "type": "string"} in search["properties"]["kind"]["anyOf"]
    add = tools["add_memory"].input_schema
    assert add["required"] == ["text"] and add["properties"]["kind"]["enum"] == ["fact", "note", "decision"]
    assert add["properties"]["tags"]["items"] == {"type": "string"} and add["properties"]["extract"]["default"] is False
    assert tools["get_memory"].input_schema["required"] == ["id"]
    assert tools["conversation_summary"].input_schema["required"] == ["conversation"]
    for name in ("search_memory", "get_memory", "recent_memories", "memory_history", "conversation_summary"):
        assert tools[name].annotations.read_only_hint is True and tools[name].annotations.open_world_hint is False
    for name in ("add_memory", "delete_memory"):
        assert tools[name].annotations.read_only_hint is False and tools[name].annotations.destructive_hint is True
    assert tools["add_memory"].annotations.open_world_hint is True  # extract talks to the configured LLM
    # The field names of `--json` and REST (docs/design.md, "The library API and its faces").
    assert set(tools["search_memory"].output_schema["$defs"]["SearchRow"]["properties"]) >= {
        "id", "text", "role", "conversation_id", "created_at", "score", "meta", "superseded"}
    assert set(tools["get_memory"].output_schema["properties"]) >= {
        "id", "path", "role", "kind", "conversation_id", "created_at", "text", "meta", "deleted"}


def test_search_without_top_k_returns_default_top_k_results(vault_dir):
    """The tool hard-coded top_k=5, so the user's default_top_k never reached an agent."""
    vault = memvault.open_vault(vault_dir)
    vault.add([f"The user owns bicycle number {n}" for n in range(8)])
    vault.close()

    async def body(client):
        return [await call(client, "search_memory", query="bicycle"),
                await call(client, "search_memory", query="bicycle", top_k=3)]

    default, three = with_client(vault_dir, body, default_top_k=7)
    assert len(default["results"]) == 7 and len(three["results"]) == 3


def test_a_new_vault_answers_empty_until_the_first_add_creates_it(vault_dir):
    async def body(client):
        empty = [await call(client, "search_memory", query="anything"), await call(client, "recent_memories"),
                 await call(client, "memory_history"), await call(client, "conversation_summary", conversation="global")]
        missing = await refused(client, "get_memory", id="abcd1234")
        added = await call(client, "add_memory", text="The user keeps bees")
        return empty, missing, added, await call(client, "search_memory", query="bees")

    empty, missing, added, found = with_client(vault_dir, body)
    assert empty == [{"results": []}, {"data": [], "has_more": False, "next_cursor": None}, {"entries": []},
                     {"conversation_id": "global", "summary": None, "updated_at": None}]
    assert "no memory with id 'abcd1234'" in missing
    assert search_texts(found) == ["The user keeps bees"] and added["memories"][0]["stored"] is True
    assert git(vault_dir, "log", "--format=%s") == "memvault add: 1 memory (global)\nmemvault init: new vault\n"


def test_a_warm_up_that_fails_leaves_calls_an_error_to_report_not_a_wait(vault_dir, capfd):
    """The server loads the models in a thread after tools/list; when they cannot load, the calls
    that need them say why, one line each, and the others work."""
    assert run_cli("add", "The user keeps bees").exit_code == 0
    vault = memvault.open_vault(vault_dir, watch=True, embedding_model="nowhere/no-such-model")

    async def body(client):
        await client.list_tools()
        return (await refused(client, "search_memory", query="bees"),
                await call(client, "recent_memories"))

    async def main():
        async with Client(build_server(vault, warm_up=True)) as client:
            return await body(client)

    try:
        failed, recent = anyio.run(main)
    finally:
        vault.close()
    assert "nowhere/no-such-model" in failed
    assert [m["text"] for m in recent["data"]] == ["The user keeps bees"]
    assert "memvault: warm-up failed:" in capfd.readouterr().err


def test_parallel_calls_all_land(vault_dir):
    """The SDK runs each call on a worker thread: adds and searches at once, from the first write on."""
    async def body(client):
        outcomes = {}

        async def one(i: int):
            if i % 3 == 0:
                outcomes[i] = await client.call_tool("add_memory", {"text": f"parallel memory {i}"})
            else:
                outcomes[i] = await client.call_tool("search_memory", {"query": f"memory {i}"})

        async with anyio.create_task_group() as group:
            for i in range(12):
                group.start_soon(one, i)
        return outcomes, await call(client, "recent_memories", limit=20)

    outcomes, recent = with_client(vault_dir, body)
    assert [i for i, result in outcomes.items() if result.is_error] == []
    assert sorted(m["text"] for m in recent["data"]) == sorted(f"parallel memory {i}" for i in range(0, 12, 3))
    assert git(vault_dir, "status", "--porcelain") == ""
    assert git(vault_dir, "log", "--format=%s").count("memvault add: 1 memory") == 4


def test_add_then_search_finds_it_with_files_and_commits_as_the_cli_makes_them(vault_dir):
    assert run_cli("add", "-c", "work", "--kind", "note", "-t", "infra", "Read the Postgres 16 notes").exit_code == 0

    async def body(client):
        added = await call(client, "add_memory", text="Chose Postgres for billing", conversation="work",
                           kind="decision", tags=["billing", "db"])
        found = await call(client, "search_memory", query="which database for billing?")
        only_decisions = await call(client, "search_memory", query="Postgres", kind="decision")
        elsewhere = await call(client, "search_memory", query="Postgres", conversation="home")
        in_work = await call(client, "search_memory", query="Postgres", conversation="work", top_k=1)
        return added, found, only_decisions, elsewhere, in_work

    added, found, only_decisions, elsewhere, in_work = with_client(vault_dir, body)
    [change] = added["memories"]
    assert change.items() >= {"stored": True, "kind": "decision", "role": "decision", "conversation_id": "work",
                              "text": "Chose Postgres for billing"}.items()
    best = found["results"][0]
    assert best["id"] == change["id"] and best["text"] == "Chose Postgres for billing"
    assert best["role"] == "decision" and best["conversation_id"] == "work" and best["meta"]["tags"] == ["billing", "db"]
    assert 0 < best["score"] <= 1 and best["created_at"].endswith("+00:00")
    assert search_texts(only_decisions) == ["Chose Postgres for billing"]
    assert elsewhere["results"] == []  # conversation 'home' (plus global) holds none of them
    assert len(in_work["results"]) == 1
    # The file and the commit are what `memvault add` makes.
    memory = memvault.open_vault(vault_dir).get(change["id"])
    assert memory.path.relative_to(vault_dir).parts[:3] == ("entries", "work", "decisions")
    assert memory.path.name.endswith(f"__{change['id']}.md")
    assert list(memory.front_matter())[:5] == ["id", "role", "conversation_id", "created_at", "tags"]
    assert git(vault_dir, "log", "-1", "--format=%s") == "memvault add: 1 memory (work)\n"
    assert f"Memvault-Added: {change['id']}" in git(vault_dir, "log", "-1", "--format=%b")
    assert git(vault_dir, "log", "-1", "--format=%s", "HEAD~1") == "memvault add: 1 memory (work)\n"
    assert git(vault_dir, "status", "--porcelain") == ""


def test_extract_stores_the_fact_and_sets_aside_the_one_it_contradicts(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")

    async def body(client):
        llm_env.push(facts("The user loves pizza"))
        first = await call(client, "add_memory", text="I love pizza", extract=True)
        llm_env.push(facts("The user hates pizza"), NO)
        second = await call(client, "add_memory", text="Honestly, I hate pizza now", extract=True)
        found = await call(client, "search_memory", query="pizza")
        old = await call(client, "get_memory", id=first["changes"][0]["id"])
        llm_env.push(facts())
        nothing = await call(client, "add_memory", text="What time is it in Lisbon right now?", extract=True)
        return first, second, found, old, nothing

    first, second, found, old, nothing = with_client(vault_dir, body)
    [loves] = first["changes"]
    assert loves["event"] == "ADD" and loves["text"] == "The user loves pizza"
    events = {c["event"]: c for c in second["changes"]}
    assert set(events) == {"ADD", "REPLACE"}
    hates = events["ADD"]
    assert hates["text"] == "The user hates pizza"
    assert events["REPLACE"]["id"] == loves["id"] and events["REPLACE"]["replaced_by"] == hates["id"]
    assert search_texts(found) == ["The user hates pizza"]
    assert old["deleted"] is True and old["meta"]["replaced_by"] == hates["id"]
    assert old["meta"]["deleted_reason"] == "contradiction"
    assert nothing == {"memories": [], "changes": [], "note": "no facts found in the text"}
    assert f"Memvault-Replaced: {loves['id']} -> {hates['id']}" in git(vault_dir, "log", "-1", "--format=%b")
    assert git(vault_dir, "status", "--porcelain") == ""
    assert "Honestly, I hate pizza now" in llm_env.requests[1]["messages"][-1]["content"]


def test_delete_then_search_does_not_find_it_and_get_and_history_tell_why(vault_dir):
    async def body(client):
        [bees] = (await call(client, "add_memory", text="The user keeps bees"))["memories"]
        await call(client, "add_memory", text="The user keeps goats")
        commits = git(vault_dir, "rev-list", "--count", "HEAD")
        deleted = await call(client, "delete_memory", id=bees["id"][:8], reason="sold the hives")
        after = git(vault_dir, "rev-list", "--count", "HEAD")
        # words both memories have: the relevance floor keeps goats out of a search for "bees"
        found = await call(client, "search_memory", query="the user keeps", top_k=5)
        again = await call(client, "get_memory", id=bees["id"])
        recent = await call(client, "recent_memories")
        history = await call(client, "memory_history", id=bees["id"][:6])
        twice = await refused(client, "delete_memory", id=bees["id"])
        # As of before the deletion (issue 29): the bees were still there.
        moment = (datetime.fromisoformat(deleted["meta"]["deleted_at"]) - timedelta(microseconds=1)).isoformat()
        then = await call(client, "search_memory", query="the user keeps bees", top_k=5, as_of=moment)
        then_recent = await call(client, "recent_memories", as_of=moment)
        then_get = await call(client, "get_memory", id=bees["id"], as_of=moment)
        # A page at a time, as `memvault ls` and GET /v1/memories page (the library's cursor).
        first = await call(client, "recent_memories", as_of=moment, limit=1)
        second = await call(client, "recent_memories", as_of=moment, limit=1, cursor=first["next_cursor"])
        bad_cursor = await refused(client, "recent_memories", cursor="nonsense")
        return bees, commits, deleted, after, found, again, recent, history, twice, (
            then, then_recent, then_get, (first, second, bad_cursor))

    bees, commits, deleted, after, found, again, recent, history, twice, as_of = with_client(vault_dir, body)
    then, then_recent, then_get, (first, second, bad_cursor) = as_of
    assert [m["text"] for m in first["data"]] == ["The user keeps goats"] and first["next_cursor"]
    assert [m["text"] for m in second["data"]] == ["The user keeps bees"] and second["next_cursor"] is None
    assert "cursor 'nonsense' is not one a listing gave" in bad_cursor
    assert "The user keeps bees" in search_texts(then)
    assert "The user keeps bees" in [m["text"] for m in then_recent["data"]]
    assert then_get["deleted"] is False and then_get["text"] == "The user keeps bees"
    assert int(after) == int(commits) + 1  # one commit
    assert deleted["id"] == bees["id"] and deleted["deleted"] is True and "/deleted/facts/" in deleted["path"]
    assert "The user keeps bees" not in search_texts(found) and "The user keeps goats" in search_texts(found)
    assert again["deleted"] is True and again["meta"]["deleted_reason"] == "user"
    assert again["meta"]["deleted_note"] == "sold the hives" and "replaced_by" not in again["meta"]
    assert [m["text"] for m in recent["data"]] == ["The user keeps goats"]
    [removal, addition] = history["entries"]
    assert removal["command"] == "rm" and removal["changes"][0].items() >= {
        "id": bees["id"], "action": "deleted", "reason": "user", "note": "sold the hives"}.items()
    assert addition["changes"][0]["action"] == "added"
    assert "is deleted (user)" in twice
    assert f"Memvault-Deleted: {bees['id']}" in git(vault_dir, "log", "-1", "--format=%b")


def test_bad_arguments_give_one_line_error_results_and_the_server_keeps_serving(vault_dir, monkeypatch):
    vault = memvault.open_vault(vault_dir)
    twins = [files.new_memory(text) for text in ("The user keeps bees", "The user keeps goats")]
    twins[0].id, twins[1].id = "abcd1111-0000-4000-8000-000000000001", "abcd2222-0000-4000-8000-000000000002"
    vault.add_memories(twins)
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", refused_url())
    monkeypatch.setenv("MEMVAULT_LLM_TIMEOUT", "5")

    async def body(client):
        said = {
            "unknown id": await refused(client, "get_memory", id="ffff0000"),
            "ambiguous": await refused(client, "delete_memory", id="abcd"),
            "short": await refused(client, "get_memory", id="ab"),
            "hostile": await refused(client, "add_memory", text="x", conversation="../../etc"),
            "control": await refused(client, "search_memory", query="x", conversation="a\x00b"),
            "empty": await refused(client, "add_memory", text="   "),
            "nul": await refused(client, "add_memory", text="bad\x00text"),
            "llm down": await refused(client, "add_memory", text="I moved to Lisbon", extract=True),
            "extract kind": await refused(client, "add_memory", text="x", kind="note", extract=True),
            "top_k": await refused(client, "search_memory", query="bees", top_k=0),
            "type": await refused(client, "search_memory", query="bees", top_k="many"),
            "kind": await refused(client, "search_memory", query="bees", kind="memo"),
            "since": await refused(client, "search_memory", query="bees", since="last tuesday-ish"),
            "missing": await refused(client, "search_memory"),
            "unknown argument": await refused(client, "search_memory", query="bees", k=3),
            "reason": await refused(client, "delete_memory", id="abcd1111", reason="x" * 3000),
            "limit": await refused(client, "recent_memories", limit=0),
            "history id": await refused(client, "memory_history", id="ffff0000"),
            "summary": await refused(client, "conversation_summary", conversation=".."),
            "empty query": await refused(client, "search_memory", query="  "),
            "stats argument": await refused(client, "vault_stats", conversation="x"),
        }
        return said, await call(client, "search_memory", query="bees", top_k=1)

    said, after = with_client(vault_dir, body)
    assert "no memory with id 'ffff0000'" in said["unknown id"]
    assert "id prefix 'abcd' is ambiguous" in said["ambiguous"]
    assert "too short" in said["short"]
    assert "'.' or '..' path component" in said["hostile"] and "control characters" in said["control"]
    assert "the text is empty" in said["empty"] and "NUL byte" in said["nul"]
    assert "unreachable" in said["llm down"] and "llm_base_url" in said["llm down"]
    assert "does not go with kind 'note'" in said["extract kind"]
    assert "top_k: input should be greater than or equal to 1 (got 0)" in said["top_k"]
    assert "top_k: input should be a valid integer" in said["type"]
    assert "kind:" in said["kind"] and "'fact'" in said["kind"]
    assert "not an ISO 8601 date-time" in said["since"]
    assert said["missing"].endswith("query is required")
    assert "unknown argument 'k' (search_memory takes query, top_k" in said["unknown argument"]
    assert "at most 2000" in said["reason"] and "limit: input should be greater" in said["limit"]
    assert "no memory with id 'ffff0000' in the history" in said["history id"]
    assert "path component" in said["summary"]
    # An empty query was an empty answer, as if nothing matched; a tool without arguments said
    # "(vault_stats takes )"; a memory not found was said with the vault's path on the server's disk.
    assert said["empty query"].endswith("nothing to search for: the query is empty")
    assert said["stats argument"].endswith("unknown argument 'conversation' (vault_stats takes no arguments)")
    assert said["unknown id"].endswith("no memory with id 'ffff0000' in the vault")
    assert not any(str(vault_dir) in line for line in said.values())
    # Nothing was written by the refused calls, and the next call works.
    assert search_texts(after) == ["The user keeps bees"]
    assert len(list(memvault.open_vault(vault_dir).vault.iter_memories(include_deleted=True))) == 2
    assert git(vault_dir, "status", "--porcelain") == ""


def test_memory_history_of_an_import_lists_a_hundred_changes_and_says_how_many(vault_dir):
    vault = memvault.open_vault(vault_dir)
    vault.add_jsonl("".join(json.dumps({"text": f"Imported memory {n}"}) + "\n" for n in range(130)))
    vault.add("The user keeps bees")

    async def body(client):
        return await call(client, "memory_history", limit=5)

    latest, imported = with_client(vault_dir, body)["entries"]
    assert latest["changes_total"] == 1 and latest["changes"][0]["text"] == "The user keeps bees"
    assert imported["changes_total"] == 130 and len(imported["changes"]) == 100
    assert {c["action"] for c in imported["changes"]} == {"added"}


def test_recent_memories_and_the_conversation_summary(vault_dir):
    vault = memvault.open_vault(vault_dir)
    vault.add("The user keeps bees", created_at="2026-01-01T00:00:00Z")
    vault.add("Standup moved to 9:15", conversation="work", created_at="2026-01-02T00:00:00Z")
    vault.add("Read about error budgets", conversation="work", kind="note", created_at="2026-01-03T00:00:00Z")
    summary = files.new_memory("Dana works on billing; standups at 9:15.", "summary", "work",
                               extra={"summary_kind": "rolling", "updated_at": "2026-01-04T00:00:00+00:00"})
    vault.add_memories([summary, files.new_memory("hello", "user", "work")])

    async def body(client):
        return (await call(client, "recent_memories"), await call(client, "recent_memories", conversation="work",
                                                                   limit=1),
                await call(client, "recent_memories", kind="turn"),
                await call(client, "conversation_summary", conversation="work"),
                await call(client, "conversation_summary", conversation="global"))

    everything, work, turns, summary_work, summary_global = with_client(vault_dir, body)
    assert [m["text"] for m in everything["data"]] == ["Read about error budgets", "Standup moved to 9:15",
                                                          "The user keeps bees"]
    assert work["data"][0].items() >= {"text": "Read about error budgets", "kind": "note", "conversation_id": "work"}.items()
    assert [m["text"] for m in turns["data"]] == ["hello"]
    assert summary_work == {"conversation_id": "work", "summary": "Dana works on billing; standups at 9:15.",
                            "updated_at": "2026-01-04T00:00:00+00:00"}
    assert summary_global == {"conversation_id": "global", "summary": None, "updated_at": None}


def test_the_next_call_sees_hand_edits_and_other_processes(vault_dir):
    async def body(client):
        [bees] = (await call(client, "add_memory", text="The user keeps bees"))["memories"]
        assert run_memvault("add", "-c", "farm", "The user keeps two goats").returncode == 0  # another terminal

        async def goats():
            return "The user keeps two goats" in search_texts(await call(client, "search_memory", query="goats"))

        saw_goats = await eventually(goats)
        path = memvault.open_vault(vault_dir).get(bees["id"]).path
        path.write_text(path.read_text().replace("keeps bees", "keeps wild bees"))  # in place, by hand

        async def wild():
            return search_texts(await call(client, "search_memory", query="bees", top_k=1)) == [
                "The user keeps wild bees"]

        saw_edit = await eventually(wild)
        reindex = run_memvault("reindex")  # another terminal, while the server runs
        shown = await call(client, "get_memory", id=bees["id"])
        return saw_goats, saw_edit, reindex, shown

    saw_goats, saw_edit, reindex, shown = with_client(vault_dir, body)
    assert saw_goats and saw_edit
    assert reindex.returncode == 0, reindex.stderr
    assert shown["text"] == "The user keeps wild bees"
    assert git(vault_dir, "status", "--porcelain") == ""  # reindex committed the hand edit


# -- over stdio, as an agent starts it -----------------------------------------------------------

@pytest.mark.slow  # end to end: the MCP server over stdio through the official SDK
def test_memvault_mcp_over_stdio_as_an_agent_starts_it(vault_dir, tmp_path):
    """`claude mcp add memvault -- memvault mcp` (legacy initialize handshake, as clients speak it
    today), the vault in MEMVAULT_DIR; then the same through --vault and the newer protocol."""
    command = memvault_command()
    errlog = (tmp_path / "stderr.txt").open("w")

    async def session(args: list[str], env: dict[str, str], mode: str):
        params = StdioServerParameters(command=command[0], args=[*command[1:], *args], env=env)
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            added = await call(client, "add_memory", text=f"The user prefers tea ({mode})")
            found = await call(client, "search_memory", query="what does the user drink?", top_k=1)
            bad = await refused(client, "get_memory", id="0000ffff")
            shown = await call(client, "get_memory", id=added["memories"][0]["id"])
            return client.protocol_version, names, found, bad, shown

    try:
        legacy = anyio.run(session, ["mcp"], {**os.environ}, "legacy")
        other = {k: v for k, v in os.environ.items() if k != "MEMVAULT_DIR"}
        modern = anyio.run(session, ["--vault", str(vault_dir), "mcp"], other, "auto")
    finally:
        errlog.close()
    for version, names, found, bad, shown in (legacy, modern):
        assert names == TOOLS
        assert "no memory with id '0000ffff'" in bad and shown["path"].startswith("entries/global/facts/")
    assert legacy[0] < modern[0]  # a dated handshake-era version, then the newer protocol
    assert search_texts(legacy[2]) == ["The user prefers tea (legacy)"]
    assert "tea" in search_texts(modern[2])[0]
    assert git(vault_dir, "log", "-2", "--format=%s") == "memvault add: 1 memory (global)\n" * 2


STRAY_OUTPUT = """
import os, sys
import memvault.api

# A library that prints while a tool runs (Python and C level alike): it must not reach the wire.
search = memvault.api.Memvault.search
def noisy(self, *args, **kwargs):
    print("stray print from a library")
    sys.stdout.flush()
    os.write(1, b"stray bytes on fd 1\\n")
    return search(self, *args, **kwargs)
memvault.api.Memvault.search = noisy

from memvault.faces.cli import main
sys.argv = ["memvault", "mcp"]
main()
"""


def test_stdout_carries_only_protocol_messages(vault_dir):
    """A raw JSON-RPC session over a pipe: every stdout line is a protocol message, even while the
    server says things (an index built on first use, a missing reranker, a library that prints);
    those go to stderr. The server exits when the client closes stdin."""
    assert run_cli("add", "--each-line", input="The user keeps bees\nThe user keeps goats\n").exit_code == 0
    shutil.rmtree(vault_dir / ".memvault")  # the first search rebuilds the index, and says so
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "search_memory", "arguments": {"query": "bees", "top_k": 1}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "get_memory", "arguments": {"id": "0000ffff"}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "add_memory", "arguments": {"text": "The user keeps hens"}}},
    ]
    proc = subprocess.Popen([sys.executable, "-c", STRAY_OUTPUT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] and lines.put(None),
                     daemon=True).start()
    stdout: list[bytes] = []
    try:
        for request in requests:  # one at a time, each answer awaited, as a client does
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            while "id" in request:
                line = lines.get(timeout=240)
                assert line is not None, proc.stderr.read().decode()
                stdout.append(line)
                if json.loads(line).get("id") == request["id"]:
                    break
        proc.stdin.close()  # the client leaves: the server exits, before a client would kill it (2 s)
        left = time.monotonic()
        proc.wait(timeout=60)
        gone = time.monotonic() - left
        err = proc.stderr.read()
    finally:
        stop_process(proc, timeout=5)
    while (line := lines.get(timeout=10)) is not None:
        stdout.append(line)
    out = b"".join(stdout)
    assert proc.returncode == 0, err.decode()
    assert gone < 2.0
    lines = out.decode().splitlines()
    messages = [json.loads(line) for line in lines]  # every line parses: nothing else is there
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    answers = {m["id"]: m for m in messages if "id" in m}
    assert set(answers) == {1, 2, 3, 4, 5}
    assert answers[1]["result"]["serverInfo"]["name"] == "memvault"
    assert "result" in answers[3], answers[3]
    assert answers[3]["result"]["structuredContent"]["results"][0]["text"] == "The user keeps bees"
    assert answers[4]["result"]["isError"] is True
    assert answers[5]["result"]["structuredContent"]["memories"][0]["text"] == "The user keeps hens"
    said = err.decode()
    assert "stray print from a library" in said and "stray bytes on fd 1" in said
    assert "building it from 2 files" in said


def search_then_start_an_add(proc) -> None:
    """Over a raw MCP server's stdin: the handshake, a search answered, then an add_memory sent and
    left to run (what a closed stdin or a stop signal then meets)."""
    for request in [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "p", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "search_memory", "arguments": {"query": "bees"}}}]:
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        if "id" in request:
            assert json.loads(proc.stdout.readline())["id"] == request["id"]
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "add_memory", "arguments": {"text": "The user keeps hens"}}}).encode() + b"\n")
    proc.stdin.flush()


@pytest.mark.slow  # end to end: an MCP server left by its client mid-write
def test_a_client_that_leaves_mid_write_leaves_the_vault_whole(vault_dir):
    """The client closes stdin while add_memory may be running: the server finishes the write and
    commits it (or never starts it), then leaves by itself."""
    assert run_cli("add", "The user keeps bees").exit_code == 0
    proc = subprocess.Popen([*memvault_command(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        search_then_start_an_add(proc)
        time.sleep(0.05)
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        stop_process(proc)
    assert proc.returncode == 0, proc.stderr.read().decode()
    assert git(vault_dir, "status", "--porcelain") == ""
    stored = [m.text for m in memvault.open_vault(vault_dir).recent()]
    committed = git(vault_dir, "log", "--format=%s")
    assert ("The user keeps hens" in stored) == (committed.count("memvault add") == 2)


def test_vault_stats_says_what_reindex_check_says(vault_dir):
    """One answer to "is the index in step" (issue 27): the vault_stats tool, `memvault stats` and
    `reindex --check` agree, also while the server has not read a hand edit yet."""
    [bees] = memvault.open_vault(vault_dir).add("The user keeps bees")

    async def body(client):
        first = await call(client, "vault_stats")
        assert first["memories"] == 1 and first["index"]["in_step"] is True
        bees.path.write_text(bees.path.read_text().replace("bees", "hens"))
        stale = await call(client, "vault_stats")
        assert stale["index"].items() >= {"rows": 1, "in_step": False, "out_of_step": "1 changed"}.items()
        assert run_cli("reindex", "--check").exit_code == 1
        assert not json.loads(run_cli("stats", "--json").stdout)["index"]["in_step"]
        await call(client, "search_memory", query="hens")  # a read takes the hand edit in
        assert (await call(client, "vault_stats"))["index"]["in_step"] is True
        assert run_cli("reindex", "--check").exit_code == 0

    with_client(vault_dir, body)


def _sigint_ignored() -> None:
    """In the child before it runs: SIGINT ignored, as a shell leaves it for a command a script runs in
    the background."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow  # end to end: an MCP server stopped mid-write, per signal
@pytest.mark.parametrize("sig, started_with", [(signal.SIGTERM, None), (signal.SIGINT, _sigint_ignored)],
                         ids=["SIGTERM", "SIGINT-started-ignored"])
def test_a_stop_signal_mid_write_leaves_the_vault_whole_and_exits_0(vault_dir, sig, started_with):
    """A stop signal while the client is still connected and an add_memory may be running (the SDK
    reads stdin on a thread, so the server cannot wait for the client): the write finishes and is
    committed, or never starts, and the server exits at once with status 0. SIGINT too when it
    started with SIGINT ignored (the rule of every long-running command; the child is started with
    SIGINT set explicitly, since SIGINT is what is tested)."""
    assert run_cli("add", "The user keeps bees").exit_code == 0
    proc = subprocess.Popen([*memvault_command(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=started_with)
    try:
        search_then_start_an_add(proc)
        time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(sig)  # stdin stays open: the client has not left
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        stop_process(proc)
    err = proc.stderr.read().decode()
    assert code == 0 and "Traceback" not in err, err
    assert took < 10, took
    assert git(vault_dir, "status", "--porcelain") == ""
    stored = [m.text for m in memvault.open_vault(vault_dir).recent()]
    committed = git(vault_dir, "log", "--format=%s")
    assert ("The user keeps hens" in stored) == (committed.count("memvault add") == 2)


def test_a_hit_carries_its_day_and_its_relative_times_in_words(vault_dir):
    """Issue 45: what the model reads of a hit (the text content) dates it as a person does; created_at stays ISO."""
    memvault.open_vault(vault_dir).add_jsonl(json.dumps({"role": "user", "text": "I went to the lake yesterday.",
                                                         "created_at": "2023-06-06T09:00:00Z",
                                                         "conversation_id": "diary"}) + "\n")

    async def body(client):
        return await client.call_tool("search_memory", {"query": "lake", "conversation": "diary"})

    result = with_client(vault_dir, body)
    [hit] = result.structured_content["results"]
    assert hit["date"] == "Tue 6 June 2023" and hit["times"] == {"yesterday": "Mon 5 June 2023"}
    assert hit["created_at"].startswith("2023-06-06T09:00:00") and hit["text"] == "I went to the lake yesterday."
    assert "Tue 6 June 2023" in result.content[0].text and "Mon 5 June 2023" in result.content[0].text


def test_the_tools_answer_with_the_field_names_of_json_and_rest(vault_dir):
    """MCP rendered its own names (`conversation` and `kind` where `--json` says `conversation_id` and
    `role`) and its own copy of a history change: one shape per answer now, the library's to_json."""
    vault = memvault.open_vault(vault_dir)
    [bees] = vault.add("The user keeps bees", tags=["farm"])
    vault.close()

    async def body(client):
        return (await call(client, "get_memory", id=bees.id), await call(client, "search_memory", query="bees"),
                await call(client, "recent_memories"), await call(client, "memory_history"),
                await call(client, "vault_stats"))

    got, found, recent, history, stats = with_client(vault_dir, body)
    shown = json.loads(run_cli("show", "--json", bees.id).stdout)
    assert got == shown
    searched = json.loads(run_cli("search", "--json", "bees").stdout)
    assert [set(r) for r in found["results"]] == [set(r) for r in searched]
    assert [r["id"] for r in found["results"]] == [r["id"] for r in searched]
    assert recent["data"] == json.loads(run_cli("ls", "--json").stdout)
    assert history["entries"] == json.loads(run_cli("log", "--json").stdout)
    listed = json.loads(run_cli("stats", "--json").stdout)
    assert set(stats) == set(listed) and stats["by_kind"] == listed["by_kind"]
