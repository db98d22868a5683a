"""`memvault import` (ChatGPT, Claude, markdown notes, memvault's own JSON lines) and `memvault export`:
what a user brings in lands as turns and notes with their original times and ids, a second run adds
only what is new, bad input is one line each and never half-imported, and export -> import ->
export gives the same bytes."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import memvault
from conftest import git, run_cli, seed
from export_fixtures import (START, TRIP, WORK, chatgpt_conversation, chatgpt_message, claude_conversation,
                             write_json)
from memvault.store import files
from memvault.moving import jsonstream

KILL_AT = Path(__file__).with_name("kill_at.py")


def memories(vault_dir: Path, include_deleted: bool = False) -> list[files.Memory]:
    return list(memvault.open_vault(vault_dir).vault.iter_memories(include_deleted=include_deleted))


def turns_of(vault_dir: Path) -> list[files.Memory]:
    return sorted((m for m in memories(vault_dir) if m.role in ("user", "assistant")),
                  key=lambda m: m.created_at)


def tree(vault_dir: Path) -> dict[str, bytes]:
    """Every file under entries/, as bytes."""
    base = vault_dir / "entries"
    return {p.relative_to(vault_dir).as_posix(): p.read_bytes() for p in sorted(base.rglob("*.md"))}


def commits(vault_dir: Path) -> list[str]:
    return git(vault_dir, "log", "--format=%s").splitlines()


def entries_status(vault_dir: Path) -> str:
    return git(vault_dir, "status", "--porcelain", "--untracked-files=all", "--", "entries")


# -- ChatGPT -----------------------------------------------------------------------------------

def test_chatgpt_import_keeps_what_the_user_saw_with_its_times_and_ids(vault_dir, tmp_path):
    export = write_json(tmp_path / "conversations.json", [
        chatgpt_conversation("c-trip", "Trip to Lisbon", TRIP, regenerated=True, tools=True),
        chatgpt_conversation("c-work", "Work", WORK, start=START + 86400)])
    done = run_cli("import", "chatgpt", str(export))
    assert done.exit_code == 0, done.stderr
    turns = turns_of(vault_dir)
    # The path to current_node, without the system message, the custom instructions, the tool call
    # and its output, or the regenerated reply.
    assert [(t.role, t.text) for t in turns] == TRIP + WORK
    first = turns[0]
    assert first.created_at.timestamp() == START + 0.25  # the message's own create_time
    assert first.conversation_id.startswith("trip-to-lisbon-") and len(first.conversation_id) == len("trip-to-lisbon-") + 8
    assert first.extra == {"origin": "import", "imported_from": "chatgpt", "conversation_title": "Trip to Lisbon",
                           "original_conversation_id": "c-trip", "original_message_id": "c-trip-m0"}
    assert first.path.parent.as_posix().endswith(f"entries/{first.conversation_id}/turns/user")
    assert files.is_evictable(first) is False  # the user's history: eviction never takes it
    # One commit; its trailers name the conversations and how many memories each got, not every id.
    assert commits(vault_dir)[0] == f"memvault import: 6 memories in 2 conversations ({first.conversation_id}, " \
                                    f"{turns[-1].conversation_id})"
    body = git(vault_dir, "log", "-1", "--format=%B")
    assert f"Memvault-Conversation: {first.conversation_id} (4 added)" in body and "Memvault-Added" not in body
    assert entries_status(vault_dir) == ""
    assert f"+4     {first.conversation_id}  Trip to Lisbon" in done.stdout
    # Indexed: a search for the imported turns finds them.
    found = memvault.open_vault(vault_dir).search("pastry Anne loves", all_conversations=True, kinds=["turn"])
    assert found.results[0].text == "My wife Anne loves pastel de nata."


def test_the_same_import_again_adds_nothing_and_a_newer_export_only_what_is_new(vault_dir, tmp_path):
    export = write_json(tmp_path / "conversations.json", [chatgpt_conversation("c-trip", "Trip to Lisbon", TRIP[:2])])
    assert run_cli("import", "chatgpt", str(export)).exit_code == 0
    before, head = tree(vault_dir), commits(vault_dir)
    again = run_cli("import", "chatgpt", str(export))
    assert again.exit_code == 0 and "nothing new: 2 memories there already" in again.stdout
    assert tree(vault_dir) == before and commits(vault_dir) == head  # no new commit
    # Weeks later: the conversation went on, and the user renamed it.
    write_json(export, [chatgpt_conversation("c-trip", "Lisbon, May 2024", TRIP)])
    newer = run_cli("import", "chatgpt", str(export), "--json")
    assert newer.exit_code == 0, newer.stderr
    outcome = json.loads(newer.stdout)
    assert (outcome["added"], outcome["already"]) == (2, 2)
    conversations = {m.conversation_id for m in memories(vault_dir)}
    assert len(conversations) == 1 and next(iter(conversations)).startswith("trip-to-lisbon-")  # the same one


def test_bad_conversations_are_one_line_each_and_the_rest_is_imported(vault_dir, tmp_path):
    good = chatgpt_conversation("c-good", "Good", TRIP)
    orphan = chatgpt_conversation("c-orphan", "Orphan", WORK)
    orphan["mapping"]["c-orphan-m1"]["parent"] = "gone"  # a parent that is not in mapping
    cycle = chatgpt_conversation("c-cycle", "Cycle", WORK)
    cycle["mapping"]["c-cycle-root"]["parent"] = "c-cycle-m1"
    picture = chatgpt_conversation("c-picture", "Picture", WORK, start=START + 86400)
    picture["mapping"]["c-picture-m0"]["message"] = chatgpt_message(
        "c-picture-m0", "user", None, START, content_type="multimodal_text",
        parts=[{"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"}])
    no_mapping = {"title": "Odd", "id": "c-odd"}
    export = write_json(tmp_path / "conversations.json", [good, orphan, cycle, picture, no_mapping, good])
    done = run_cli("import", "chatgpt", str(export))
    assert done.exit_code == 1
    lines = done.stderr.splitlines()
    assert lines == [
        'memvault: error: skipped conversations.json, conversation 2 "Orphan" (c-orphan): broken node tree: '
        "node c-orphan-m1's parent 'gone' is not in 'mapping'",
        'memvault: error: skipped conversations.json, conversation 3 "Cycle" (c-cycle): broken node tree: '
        "node c-cycle-m1 is its own ancestor (a cycle)",
        'memvault: error: skipped conversations.json, conversation 4 "Picture" (c-picture): message c-picture-m0 '
        "(user) has no text (multimodal_text); left out",
        "memvault: error: skipped conversations.json, conversation 5: has no 'mapping' of messages: not a ChatGPT "
        "conversation",
        'memvault: error: skipped conversations.json, conversation 6 "Good" (c-good): appears twice in the file; '
        "the second one left out",
    ], done.stderr
    texts = [t.text for t in turns_of(vault_dir)]
    assert texts == [text for _, text in TRIP] + ["That sounds demanding."]  # the picture's reply is kept
    assert entries_status(vault_dir) == ""


def test_an_import_is_taken_back_by_undo_and_comes_back_when_run_again(vault_dir, tmp_path):
    export = write_json(tmp_path / "conversations.json", [chatgpt_conversation("c-trip", "Trip to Lisbon", TRIP)])
    assert run_cli("import", "chatgpt", str(export)).exit_code == 0
    imported = tree(vault_dir)
    undone = run_cli("undo")
    assert undone.exit_code == 0, undone.stderr
    assert tree(vault_dir) == {} and turns_of(vault_dir) == []
    assert run_cli("import", "chatgpt", str(export)).exit_code == 0
    assert tree(vault_dir) == imported


@pytest.mark.parametrize("content, message", [
    (json.dumps([claude_conversation("u-1", "Trip", TRIP)]),
     "conversations.json is not a ChatGPT export: its first conversation has no 'mapping' (it looks like a Claude "
     "export: `memvault import claude "),
    ('{"conversations": []}', "conversations.json is a JSON object, not an array: not a ChatGPT export"),
    ("# my notes\n", "conversations.json is not JSON (it does not start with '[')"),
    ("", "conversations.json is empty"),
    (b"[\xff\xfe]", "conversations.json is not UTF-8 text (byte 1)"),
])
def test_a_file_of_another_format_is_one_line_and_no_vault(vault_dir, tmp_path, content, message):
    export = tmp_path / "conversations.json"
    export.write_bytes(content if isinstance(content, bytes) else content.encode())
    done = run_cli("import", "chatgpt", str(export))
    assert done.exit_code == 1
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"memvault: error: {message}"), done.stderr
    assert not vault_dir.exists()  # nothing to import: no vault made


def test_a_truncated_export_imports_the_whole_conversations_and_the_full_file_later_converges(vault_dir, tmp_path):
    conversations = [chatgpt_conversation(f"c-{n}", f"Chat {n}", TRIP, start=START + n * 1000) for n in range(3)]
    full = json.dumps(conversations)
    cut = tmp_path / "conversations.json"
    cut.write_text(full[: full.index('"c-2-m2"') + 3])  # inside the third conversation
    done = run_cli("import", "chatgpt", str(cut))
    assert done.exit_code == 1
    assert done.stderr == ("memvault: error: conversations.json is cut short inside element 3 (a file that was not "
                           "copied or downloaded whole?); the 2 conversations before it were read\n")
    assert len(turns_of(vault_dir)) == 8 and entries_status(vault_dir) == ""
    cut.write_text(full)
    assert run_cli("import", "chatgpt", str(cut)).exit_code == 0
    reference = tmp_path / "reference"
    assert run_cli("--vault", str(reference), "import", "chatgpt", str(cut)).exit_code == 0
    assert tree(vault_dir) == tree(reference)


@pytest.mark.parametrize("point", ["memvault/store/files.py:atomic_write;5", "memvault/store/gitrepo.py:commit_paths"])
def test_an_import_killed_half_way_converges_when_run_again(vault_dir, tmp_path, point):
    export = write_json(tmp_path / "conversations.json",
                        [chatgpt_conversation(f"c-{n}", f"Chat {n}", TRIP, start=START + n * 1000) for n in range(3)])
    killed = subprocess.run([sys.executable, str(KILL_AT), "import", "chatgpt", str(export)], capture_output=True,
                            text=True, env={**os.environ, "KILL_AT": point}, timeout=300, start_new_session=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    again = run_cli("import", "chatgpt", str(export))
    assert again.exit_code == 0, again.stderr
    reference = tmp_path / "reference"
    assert run_cli("--vault", str(reference), "import", "chatgpt", str(export)).exit_code == 0
    assert tree(vault_dir) == tree(reference)
    assert entries_status(vault_dir) == ""  # every file committed
    assert run_cli("reindex", "--check").exit_code == 0  # and indexed


def test_dry_run_says_what_would_come_and_writes_nothing(vault_dir, tmp_path):
    export = write_json(tmp_path / "conversations.json", [chatgpt_conversation("c-trip", "Trip to Lisbon", TRIP)])
    done = run_cli("import", "chatgpt", str(export), "--dry-run")
    assert done.exit_code == 0
    assert "would add 4 memories in 1 conversation; 0 there already" in done.stdout
    assert not vault_dir.exists()


def test_since_and_the_conversation_prefix(vault_dir, tmp_path):
    export = write_json(tmp_path / "conversations.json", [chatgpt_conversation("c-trip", "Trip to Lisbon", TRIP)])
    done = run_cli("import", "chatgpt", str(export), "--since", "2023-11-14T22:13:40Z", "--conversation-prefix",
                   "gpt-")
    assert done.exit_code == 0, done.stderr
    assert "2 older than --since" in done.stdout
    turns = turns_of(vault_dir)
    assert [t.text for t in turns] == [TRIP[2][1], TRIP[3][1]]
    assert turns[0].conversation_id.startswith("gpt-trip-to-lisbon-")
    bad = run_cli("import", "chatgpt", str(export), "--conversation-prefix", "../x")
    assert bad.exit_code == 2 and "--conversation-prefix '../x'" in bad.stderr


# -- Claude ------------------------------------------------------------------------------------

def test_claude_import_reads_text_from_content_or_text(vault_dir, tmp_path):
    empty = claude_conversation("u-empty", "Empty reply", WORK, start=START + 1000)
    empty["chat_messages"][1]["content"] = [{"type": "tool_use", "name": "search", "input": {}}]
    export = write_json(tmp_path / "conversations.json", [
        claude_conversation("u-trip", "Trip", TRIP),
        claude_conversation("u-old", "Older export", WORK, start=START + 500, text_in_content=False), empty])
    done = run_cli("import", "claude", str(export))
    assert done.exit_code == 1
    assert done.stderr == ('memvault: error: skipped conversations.json, conversation 3 "Empty reply" (u-empty): '
                           "message u-empty-m1 (assistant) has no text; left out\n")
    turns = turns_of(vault_dir)
    assert [(t.role, t.text) for t in turns[:4]] == TRIP
    assert turns[0].created_at.timestamp() == START and turns[0].extra["original_message_id"] == "u-trip-m0"
    assert turns[0].extra["imported_from"] == "claude"
    assert [t.text for t in turns if t.conversation_id.startswith("older-export-")] == [text for _, text in WORK]


def test_claude_export_given_as_chatgpt_and_back_says_which(vault_dir, tmp_path):
    export = write_json(tmp_path / "conversations.json", [chatgpt_conversation("c-1", "Trip", TRIP)])
    done = run_cli("import", "claude", str(export))
    assert done.exit_code == 1 and "not a Claude export: its first conversation has no 'chat_messages' (it looks " \
                                   f"like a ChatGPT export: `memvault import chatgpt {export}`)" in done.stderr
    hinted = re.search(r"`memvault (import chatgpt [^`]+)`", done.stderr).group(1)
    assert run_cli(*shlex.split(hinted)).exit_code == 0  # the command it names, as written
    assert len(turns_of(vault_dir)) == len(TRIP)


# -- markdown notes ----------------------------------------------------------------------------

def test_a_folder_of_markdown_notes_becomes_notes(vault_dir, tmp_path):
    notes = tmp_path / "Vault"
    (notes / "people").mkdir(parents=True)
    (notes / ".obsidian").mkdir()
    (notes / ".obsidian" / "workspace.md").write_text("# not a note\n")
    (notes / "people" / "anne.md").write_text(
        "---\nid: 42\ntags: [family]\ndate: 2021-05-12\naliases: [Annie]\n---\n# Anne\n\nMy wife, see [[Lisbon trip]] "
        "and [[Bakeries|the bakeries]]. #birthday\n\n```\n#not-a-tag [[not a link]]\n```\n")
    (notes / "ideas.md").write_text("Build a boat someday.\n")
    (notes / "broken.md").write_bytes(b"caf\xe9\n")
    (notes / "empty.md").write_text("---\ntitle: nothing\n---\n\n")
    done = run_cli("import", "markdown", str(notes))
    assert done.exit_code == 1
    assert sorted(done.stderr.splitlines()) == ["memvault: error: skipped Vault/broken.md: is not UTF-8 text (byte 3)",
                                                "memvault: error: skipped Vault/empty.md: has no text"]
    by_source = {m.extra["source"]: m for m in memories(vault_dir)}
    assert set(by_source) == {"people/anne.md", "ideas.md"}
    anne = by_source["people/anne.md"]
    assert anne.role == "note" and anne.conversation_id == "global"
    assert anne.text.startswith("# Anne\n\nMy wife, see [[Lisbon trip]]")  # wikilinks kept as text
    assert anne.tags == ["family", "birthday"]
    assert anne.extra["links"] == ["Lisbon trip", "Bakeries"]
    assert anne.extra["title"] == "Anne" and anne.extra["aliases"] == ["Annie"]
    assert anne.extra["original_id"] == 42  # the note's own id, kept beside memvault's
    assert anne.created_at.isoformat().startswith("2021-05-12")
    assert anne.extra["origin"] == "import" and anne.extra["imported_from"] == "markdown"
    assert by_source["ideas.md"].extra["title"] == "ideas"  # no heading: the file name
    again = run_cli("import", "markdown", str(notes))
    assert "nothing new: 2 memories there already" in again.stdout


# -- export, and memvault's own JSON lines -----------------------------------------------------

def rich_vault(vault_dir: Path, tmp_path: Path) -> None:
    """Facts, notes, decisions, turns, a summary, a tombstone and a hand-dropped note."""
    export = write_json(tmp_path / "chat.json", [chatgpt_conversation("c-trip", "Trip to Lisbon", TRIP)])
    assert run_cli("import", "chatgpt", str(export)).exit_code == 0
    trip = turns_of(vault_dir)[0].conversation_id
    seed("The user likes cats", "Café au lait, ☕ and \"quotes\"", tags=["pets", "food"])
    seed("Stay in Alfama", conversation=trip, kind="decision", rationale="close to everything",
         alternatives=["Belem"], created_at="2024-01-02T10:00:00+02:00")
    seed("Pack light:\n- shirts\n- a hat", conversation=trip, kind="note", source="https://example.org/packing")
    gone = seed("The user lives in Porto")[0]
    vault = memvault.open_vault(vault_dir)
    vault.remove([gone.id])
    with vault.vault.change("summarize") as change:
        from memvault.learning import summaries

        summaries.write_rolling_summary(change, trip, "Planning a May trip to Lisbon with Anne.")
    dropped = vault_dir / "entries" / "global" / "scribble.md"
    dropped.write_text("A note written by hand, no front matter.\n")
    assert run_cli("reindex").exit_code == 0  # adopts it


def test_export_import_export_is_byte_identical(vault_dir, tmp_path):
    rich_vault(vault_dir, tmp_path)
    first = run_cli("export", "--all", "--include-deleted")
    assert first.exit_code == 0, first.stderr
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    assert {line["role"] for line in lines} == {"memory", "note", "decision", "user", "assistant", "summary"}
    assert any(line["deleted"] for line in lines)
    dump = tmp_path / "memories.jsonl"
    dump.write_text(first.stdout)
    other = tmp_path / "other"
    imported = run_cli("--vault", str(other), "import", "jsonl", str(dump))
    assert imported.exit_code == 0, imported.stderr
    second = run_cli("--vault", str(other), "export", "--all", "--include-deleted")
    assert second.stdout == first.stdout
    assert tree(other) == tree(vault_dir)  # the same files, byte for byte
    assert run_cli("--vault", str(other), "import", "jsonl", str(dump)).stdout.startswith("nothing new")
    assert run_cli("--vault", str(other), "search", "cats", "--json").exit_code == 0  # indexed


def test_export_markdown_digest_summary_then_facts_notes_decisions_newest_first(vault_dir, tmp_path):
    rich_vault(vault_dir, tmp_path)
    seed("The user owns a red bike", created_at="2020-01-01T00:00:00Z")
    done = run_cli("export", "--all", "--format", "markdown")
    assert done.exit_code == 0, done.stderr
    text = done.stdout
    trip = turns_of(vault_dir)[0].conversation_id
    assert text.startswith("# global\n\n## Facts\n\n- Café au lait, ☕ and \"quotes\" (")
    facts = text[text.index("## Facts"):text.index("## Notes")]
    assert facts.index("likes cats") < facts.index("red bike (2020-01-01)")  # newest first
    assert "lives in Porto" not in text  # deleted: only with --include-deleted
    lisbon = text[text.index("# Trip to Lisbon"):]
    assert lisbon.startswith(f"# Trip to Lisbon\n\nConversation `{trip}`.\n\n## Summary\n\n"
                             "Planning a May trip to Lisbon with Anne.\n\n## Notes\n\n### ")
    assert "Source: https://example.org/packing\n\nPack light:\n- shirts" in lisbon
    assert "## Decisions\n\n- Stay in Alfama (2024-01-02)\n  - Why: close to everything\n  - Alternatives: Belem" \
        in lisbon
    assert "pastel de nata" not in text  # turns are the conversation, not what it taught
    with_deleted = run_cli("export", "--format", "markdown", "--include-deleted").stdout
    assert "## Deleted or replaced\n\n- The user lives in Porto (" in with_deleted and "(user)" in with_deleted


def test_export_to_a_file_one_conversation_since(vault_dir, tmp_path):
    seed("Old fact", created_at="2020-01-01T00:00:00Z")
    seed("New fact", created_at="2025-01-01T00:00:00Z")
    seed("Elsewhere", conversation="work")
    out = tmp_path / "out.jsonl"
    done = run_cli("export", "--since", "2024-01-01", "-o", str(out), "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == {"format": "jsonl", "memories": 1, "conversations": 1, "output": str(out),
                                       "skipped": []}
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == ["New fact"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []  # no temp file left
    missing = run_cli("export", "-c", "nope")
    assert missing.exit_code == 1 and "no conversation 'nope'" in missing.stderr
    no_json = run_cli("export", "--format", "markdown", "--json")
    assert no_json.exit_code == 2


def test_import_jsonl_refuses_bad_lines_one_line_each(vault_dir, tmp_path):
    seed("The user likes cats")
    good = json.loads(run_cli("export").stdout)
    escape = dict(good, id="11111111-1111-1111-1111-111111111111", path="entries/../../etc/x.md")
    no_text = dict(good, id="22222222-2222-2222-2222-222222222222", text="")
    dump = tmp_path / "dump.jsonl"
    dump.write_text("\n".join([json.dumps(good), json.dumps(escape), "{broken", json.dumps(no_text)]) + "\n")
    other = tmp_path / "other"
    done = run_cli("--vault", str(other), "import", "jsonl", str(dump))
    assert done.exit_code == 1
    assert done.stderr.splitlines() == [
        "memvault: error: skipped dump.jsonl line 2: path 'entries/../../etc/x.md' is not a memory file in entries/ "
        "(entries/<conversation>/.../<name>.md)",
        "memvault: error: skipped dump.jsonl line 3: is not valid JSON (Expecting property name enclosed in double "
        "quotes)",
        "memvault: error: skipped dump.jsonl line 4: 'text' must be a non-empty string"]
    assert [m.text for m in memories(other)] == ["The user likes cats"]


# -- --extract ----------------------------------------------------------------------------------

def test_extract_learns_from_user_turns_and_an_interrupted_run_goes_on(vault_dir, tmp_path, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_MAX_ENTRIES", "1")  # learned facts may be evicted; imported turns never
    export = write_json(tmp_path / "conversations.json", [
        chatgpt_conversation("c-trip", "Trip", [("user", "I live in Lisbon."), ("assistant", "Nice."),
                                                ("user", "Hello there!"), ("assistant", "Hi."),
                                                ("user", "My sister is called Rita."), ("assistant", "Noted.")])])
    llm_env.push(json.dumps({"facts": ["The user lives in Lisbon"]}), {"status": 500})
    first = run_cli("import", "chatgpt", str(export), "--extract")
    assert first.exit_code == 1
    assert "learning stopped: " in first.stderr and "run the same import again to go on" in first.stderr
    facts = [m for m in memories(vault_dir) if m.role == "memory"]
    assert [f.text for f in facts] == ["The user lives in Lisbon"]
    turn = next(t for t in turns_of(vault_dir) if t.text == "I live in Lisbon.")
    assert facts[0].extra["learned_from"] == turn.id and facts[0].created_at == turn.created_at
    assert turn.extra["extracted"] is True
    asked = len(llm_env.requests)
    llm_env.push(json.dumps({"facts": ["The user's sister is called Rita"]}))
    llm_env.default = '{"answer": "yes"}'  # the fact close to an old one: still true
    second = run_cli("import", "chatgpt", str(export), "--extract")
    assert second.exit_code == 0, second.stderr
    # "Hello there!" cost no call and was marked when the first run stopped.
    assert "learned from 1 of 1 user turns (2 before)" in second.stdout
    extraction_calls = [r for r in llm_env.requests[asked:] if "Rita" in json.dumps(r) or "Lisbon." in json.dumps(r)]
    # The conversation's episode record reads every turn (docs/design.md, "Episodes"); extraction does not.
    extraction_calls = [r for r in extraction_calls if "narrative" not in json.dumps(r.get("response_format"))]
    assert not any("I live in Lisbon." in json.dumps(r) for r in extraction_calls)  # not asked again
    assert {t.extra.get("extracted") for t in turns_of(vault_dir) if t.role == "user"} == {True}
    assert len(turns_of(vault_dir)) == 6  # no imported turn was evicted
    third = run_cli("import", "chatgpt", str(export), "--extract")
    assert third.exit_code == 0 and "learned from 0 of 0 user turns (3 before)" in third.stdout


# -- the stream reader -------------------------------------------------------------------------

def test_the_stream_reader_reads_an_array_in_any_chunking(tmp_path, monkeypatch):
    data = [{"text": "é" * n, "n": n, "nested": [1.5, None, True, {"q": "\"\\"}]} for n in range(60)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    for chunk in (1, 2, 7, 1 << 20):
        monkeypatch.setattr(jsonstream, "CHUNK", chunk)
        assert list(jsonstream.iter_array(path)) == data
    raw = path.read_bytes()
    monkeypatch.setattr(jsonstream, "CHUNK", 5)
    for cut in range(1, len(raw) - 1, 37):
        path.write_bytes(raw[:cut])
        with pytest.raises(jsonstream.JSONStreamError) as caught:
            list(jsonstream.iter_array(path))
        assert caught.value.kind == "truncated" or "UTF-8" in caught.value.detail, (cut, caught.value)


def test_invalid_json_early_in_a_large_file_is_found_without_reading_the_rest(tmp_path):
    path = tmp_path / "big.json"
    element = json.dumps({"text": "x" * 1000})
    with open(path, "w") as handle:
        handle.write("[" + element + ", {\"text\": oops}")
        for _ in range(20_000):  # 20 MB after the error
            handle.write(", " + element)
        handle.write("]")
    seen = []
    with pytest.raises(jsonstream.JSONStreamError) as caught:
        list(jsonstream.iter_array(path, progress=lambda done, total: seen.append(done)))
    assert caught.value.kind == "invalid" and caught.value.count == 1
    assert "element 2 (Expecting value)" in str(caught.value)
    assert seen and seen[-1] <= 2 * jsonstream.CHUNK  # one element read, not the whole file
