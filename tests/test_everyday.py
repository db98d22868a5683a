"""Everyday use (issue #19): browsing without a query, quiet when nothing is wrong, strict about
options, progress on long work, no piles of duplicates, chat commands, and small fixes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

import memvault
from conftest import REPO, git, memvault_command, run_cli, seed, stop_process
from test_terminal import run_in_pty

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def loud_again():
    """`-q` sets a process-wide flag (memvault.faces.term); later tests in this process start loud."""
    yield
    from memvault.faces import term

    term.configure(quiet=False)


# -- browsing ----------------------------------------------------------------------------------

def test_conversations_and_stats(vault_dir):
    seed("The user keeps bees", "The user grows leeks")
    seed("Ship on Friday", conversation="work", kind="decision")
    seed("Read the design doc", conversation="a/b", kind="note")
    [gone] = seed("an old fact", conversation="work")
    memvault.open_vault(vault_dir).remove([gone.id])
    listing = json.loads(run_cli("conversations", "--json").stdout)
    by_id = {c["conversation_id"]: c for c in listing}
    assert set(by_id) == {"global", "work", "a/b"}  # the real id, also behind a hashed folder name
    assert by_id["global"]["counts"] == {"fact": 2} and by_id["work"]["counts"] == {"decision": 1}
    assert by_id["work"]["deleted"] == 1 and by_id["a/b"]["folder"] != "a/b"
    text = run_cli("conversations").stdout.splitlines()
    assert text[0].startswith("a/b") and "1 note" in text[0]  # newest activity first
    data = json.loads(run_cli("stats", "--json").stdout)
    assert data["memories"] == 4 and data["by_kind"] == {"decision": 1, "fact": 2, "note": 1}
    assert data["deleted"] == 1 and data["index"]["rows"] == 4 and data["index"]["in_step"]
    assert data["last_commit"]["subject"].startswith("memvault rm:")
    assert data["disk"]["entries"] > 0 and data["disk"]["git"] > 0
    assert "4 (1 decision, 2 fact, 1 note)" in run_cli("stats").stdout


# -- notices once ---------------------------------------------------------------------------------

def test_the_missing_reranker_is_said_once_per_vault(vault_dir, monkeypatch, tmp_path):
    seed("The user keeps bees")
    first = run_cli("search", "bees")
    assert "reranker" in first.stderr
    again = run_cli("search", "bees")
    assert again.exit_code == 0 and again.stderr == ""
    assert "reranker" in run_cli("-v", "search", "bees").stderr  # -v and --explain always say it
    assert "reranker" in run_cli("search", "--explain", "bees").stderr
    assert "reranker" in run_cli("search", "bees", "-v").stderr  # (-v after the command too)
    monkeypatch.setenv("MEMVAULT_RERANKER_MODEL", str(tmp_path / "no-such-model"))
    assert "no-such-model" in run_cli("search", "bees").stderr  # something changed: said again
    assert run_cli("search", "bees").stderr == ""


def test_a_failed_download_exits_1(vault_dir, monkeypatch):
    monkeypatch.setenv("MEMVAULT_RERANKER_MODEL", "example/not-a-real-cross-encoder")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # no network here anyway: fail fast
    result = run_cli("models", "--download")
    assert result.exit_code == 1 and "could not download example/not-a-real-cross-encoder" in result.stderr


@pytest.mark.slow  # end to end: a watcher process fed broken files (~9 s here)
def test_watch_reports_a_skipped_file_once_until_it_changes(vault_dir):
    seed("The user keeps bees")
    proc = subprocess.Popen([*memvault_command(), "reindex", "--watch"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    folder = vault_dir / "entries" / "global" / "facts"
    said: list[str] = []  # stderr, read as it comes: a sync reports after it has adopted the files
    reader = threading.Thread(target=lambda: said.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()

    def skipped() -> list[str]:
        return [line for line in list(said) if line.startswith("memvault: skipped")]

    try:
        deadline = time.time() + 120
        _wait_for(lambda: any("watching" in line for line in list(said)), proc, deadline)
        broken = folder / "broken.md"
        broken.write_text("---\nid: [oops\n---\nx\n")
        for number in range(3):  # three more syncs, each triggered by a good hand-written note
            good = folder / f"good-{number}.md"
            good.write_text(f"note number {number} written by hand\n")
            _wait_for(lambda: good.read_text().startswith("---"), proc, deadline)  # adopted by a sync
        # the syncs for good-0 and good-1 have finished and reported: a file said again would show here
        assert len(skipped()) <= 1, skipped()
        broken.write_text("---\nid: [still broken\n---\ny\n")  # it changed: said again
        good = folder / "good-last.md"
        good.write_text("the last note written by hand\n")
        _wait_for(lambda: good.read_text().startswith("---"), proc, deadline)
        _wait_for(lambda: len(skipped()) >= 2, proc, deadline)
    finally:
        stop_process(proc, timeout=30)
    reader.join(timeout=10)
    assert len(skipped()) == 2, skipped()  # once for the first version, once more after it changed
    assert all(str(broken) in line for line in skipped())


def _wait_for(condition, proc, deadline) -> None:
    deadline = max(deadline, time.time() + 60)  # each sync gets its own minute on a loaded machine
    while not condition():
        if not (proc.poll() is None and time.time() < deadline):
            stop_process(proc, timeout=30)
            raise AssertionError(f"the watcher did not sync: {proc.communicate(timeout=30)}")
        time.sleep(0.2)


def test_verbose_add_and_search_say_what_happened(vault_dir):
    added = run_cli("-v", "add", "The user keeps bees")
    assert "stored and indexed 1" in added.stderr and "commit" in added.stderr
    found = run_cli("search", "-v", "bees")
    assert "1 results" in found.stderr and "embed" in found.stderr and "candidates" in found.stderr


def test_quiet_and_verbose_after_the_command(vault_dir):
    quiet = run_cli("add", "-q", "The user keeps bees")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert run_cli("search", "bees", "-q").stderr == ""
    tagged = run_cli("search", "--tag", "-q", "bees")  # a tag named "-q" is a tag, not a flag
    assert tagged.exit_code == 0 and tagged.stdout == ""


# -- strict options --------------------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["search", "-a", "-c", "work", "x"], "do not go together"),
    (["reconcile", "--all", "-c", "work"], "do not go together"),
    (["reindex", "--check", "--full"], "do not go together"),
    (["add", "--rationale", "because", "x"], "for decisions"),
    (["add", "--extract", "--kind", "decision", "x"], "--extract learns facts; it does not go with --kind 'decision'"),
    (["add", "--extract", "--tag", "home", "x"], "leave out --tag"),
    (["search", "bees", "--since", "last tuesday-ish"], "--since 'last tuesday-ish' is not an ISO 8601 date-time"),
    (["chat", "--model", "", "hello"], "option --model"),
    (["log", "--since", "garbage"], "is not a date"),
])
def test_conflicting_or_bad_options_are_usage_errors(vault_dir, args, words):
    seed("something to have a vault")
    result = run_cli(*args)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_flags_show_without_a_type_placeholder():
    for command in ("add", "search", "reindex", "chat"):
        text = run_cli(command, "--help").stdout
        assert "<bool>" not in text, command
    assert "<bool>" not in run_cli("--help").stdout


# -- progress and duplicates -------------------------------------------------------------------------

@pytest.mark.slow  # end to end: a long add in a pseudo-terminal and in a pipe
def test_a_long_add_shows_progress_on_a_terminal_only(vault_dir, tmp_path):
    lines = tmp_path / "many.txt"
    lines.write_text("\n".join(f"line number {i} of a long list" for i in range(400)))
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    shown = run_in_pty([*memvault_command(), "add", "--each-line", "--file", str(lines)], env)
    assert "adding" in shown and "%" in shown
    lines.write_text("\n".join(f"another line {i}" for i in range(400)))
    off = run_cli("add", "--each-line", "--file", str(lines))
    assert off.exit_code == 0 and "adding" not in off.stderr and len(off.stdout.splitlines()) == 400


def test_an_exact_duplicate_is_not_stored_again(vault_dir):
    [first] = seed("The user keeps bees")
    again = run_cli("add", "The user keeps bees")
    assert again.exit_code == 0 and again.stdout == ""
    assert f"already stored as {first.id}" in again.stderr
    data = json.loads(run_cli("add", "--json", "The user keeps bees").stdout)
    assert data == [{**first.to_json(vault_dir), "stored": False}]
    other = run_cli("add", "-c", "work", "The user keeps bees")  # another conversation: not a duplicate
    assert other.exit_code == 0 and other.stdout
    forced = run_cli("add", "--allow-duplicate", "The user keeps bees")
    assert forced.exit_code == 0 and forced.stdout
    texts = [m.text for m in memvault.open_vault(vault_dir).vault.iter_memories(conversation="global")]
    assert texts.count("The user keeps bees") == 2
    assert git(vault_dir, "log", "-1", "--format=%s").startswith("memvault add")


# -- interactive chat --------------------------------------------------------------------------------

@pytest.mark.slow  # end to end: an interactive chat driven through a pseudo-terminal
def test_interactive_chat_commands_never_reach_the_model(vault_dir, llm_env):
    seed("The user keeps bees")
    llm_env.push("Hello!")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = "/help\n/search bees\n/context\n/clear\n/nonsense\nhi\n/quit\n"
    out = _chat_on_a_terminal(env, script)
    assert "/search QUERY" in out and "The user keeps bees" in out and "unknown command /nonsense" in out
    assert "new session for global" in out and "Hello!" in out
    assert [r["messages"][-1]["content"] for r in llm_env.requests if r.get("stream")] == ["hi"]


def _chat_on_a_terminal(env: dict, script: str) -> str:
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen([*memvault_command(), "chat", "--no-learn"], stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks, lines = [], script.splitlines(keepends=True)
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
                if b"> " in data and lines:  # a prompt: the next line
                    os.write(master, lines.pop(0).encode())
            elif proc.poll() is not None:
                break
    finally:
        stop_process(proc, timeout=30)
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


# -- small fixes -------------------------------------------------------------------------------------

def test_summarize_print_shows_the_summary_when_nothing_is_new(vault_dir, llm_env):
    seed("The user keeps bees", "The user grows leeks", "The user lives in Porto")
    llm_env.push("The user keeps bees, grows leeks and lives in Porto.")
    assert run_cli("summarize").exit_code == 0
    result = run_cli("summarize", "--print")  # nothing new: no model call, the summary as it is
    assert result.exit_code == 0 and result.stdout == "The user keeps bees, grows leeks and lives in Porto.\n"
    assert "nothing new" in result.stderr


def test_context_in_the_past_never_shows_a_negative_idle_time(vault_dir, llm_env):
    llm_env.push("Hi.")
    assert run_cli("chat", "--now", T0.isoformat(), "--no-learn", "hello").exit_code == 0
    data = json.loads(run_cli("chat", "--context", "--json", "--now", (T0 - timedelta(hours=1)).isoformat()).stdout)
    assert data["idle_seconds"] == 0
    assert "idle 0 min" in run_cli("chat", "--context", "--now", (T0 - timedelta(hours=1)).isoformat()).stdout


def test_each_rejected_edit_is_kept_under_its_own_name(vault_dir, tmp_path, monkeypatch):
    [memory] = seed("The user keeps bees")
    editor = tmp_path / "breaks-it.py"
    editor.write_text(f"#!{sys.executable}\nimport sys\nopen(sys.argv[-1], 'w').write('---\\nid: [x\\n---\\nt\\n')\n")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    for _ in range(2):
        assert run_cli("edit", memory.id).exit_code == 1
    assert len(list((vault_dir / ".memvault" / "rejected").iterdir())) == 2


def test_a_file_with_front_matter_but_no_id_is_adopted(vault_dir):
    seed("The user keeps bees")
    note = vault_dir / "entries" / "global" / "notes" / "from-obsidian.md"
    note.parent.mkdir(parents=True)
    note.write_text("---\ntitle: Garden plan\ntags: [garden]\n---\nPlant leeks in March.\n")
    result = run_cli("reindex")
    assert result.exit_code == 0, result.stderr
    assert "adopted entries/global/notes/from-obsidian.md" in result.stderr
    memory = memvault.open_vault(vault_dir).search("leeks", kinds=["note"]).results[0]
    assert memory.text == "Plant leeks in March." and memory.meta["title"] == "Garden plan"
    assert memory.meta["tags"] == ["garden"] and "id: " in note.read_text()
    assert git(vault_dir, "status", "--porcelain") == ""


def test_ls_lists_without_a_query_newest_first(vault_dir):
    seed("Plant leeks in March", tags=["garden"], created_at="2026-03-01T10:00:00+00:00")
    seed("Ship on Friday", conversation="work", kind="decision", created_at="2026-03-02T10:00:00+00:00")
    [gone] = seed("a temporary fact", created_at="2026-03-03T10:00:00+00:00")
    memvault.open_vault(vault_dir).remove([gone.id])
    lines = run_cli("ls").stdout.splitlines()
    assert [line.split()[3] for line in lines] == ["decision", "fact"]  # newest first, deleted ones left out
    assert " work " in lines[0] and lines[0].endswith("Ship on Friday")
    assert [m["text"] for m in json.loads(run_cli("ls", "--json", "-t", "garden").stdout)] == ["Plant leeks in March"]
    assert [m["text"] for m in json.loads(run_cli("ls", "--json", "-c", "work").stdout)] == ["Ship on Friday"]
    assert json.loads(run_cli("ls", "--json", "--kind", "note").stdout) == []
    assert [m["text"] for m in json.loads(run_cli("ls", "--json", "--until", "2026-03-01T23:00:00Z").stdout)] == [
        "Plant leeks in March"]
    deleted = json.loads(run_cli("ls", "--json", "--deleted").stdout)
    assert [(m["text"], m["deleted"]) for m in deleted] == [("a temporary fact", True)]
    assert len(json.loads(run_cli("ls", "--json", "-n", "1").stdout)) == 1
    assert run_cli("ls", "-a", "-c", "work").exit_code == 2


def test_the_plain_search_list_says_each_memory_s_day(vault_dir):
    """A result's day was only in --json (issue 44, item 8): "when did I say that" needs it on the list."""
    run_cli("add", "--jsonl", "-", input=json.dumps({"text": "The user keeps bees", "created_at": "2024-02-29T10:00:00Z"}))
    [line] = run_cli("search", "bees").stdout.splitlines()
    assert "  Thu 29 February 2024  [memory] The user keeps bees" in line  # the day in words (issue 45)
