"""Reliability (issue 6): concurrent writers, kills mid-write, hostile input, security.

Everything is real: `memvault` processes, SIGKILL, git, LanceDB, the bundled embedder and a
scripted OpenAI-compatible HTTP server. Kills land at exact points of the work through
tests/kill_at.py (a profile hook that SIGKILLs the whole process group, git children included,
when a named function is reached); bench/torture.py adds ≥ 50 kills at random moments.

Where each bullet of the issue is covered (existing tests named by file):

Concurrent writers
  20 `add` processes at once ............. test_concurrency.py::test_twenty_parallel_adds_all_land
  `add` racing `reindex --watch`/`search` . test_add_racing_watch_and_search_loses_nothing
Kills (invariants in `assert_intact` and `assert_converges`)
  `add` at each write step ............... test_kill_add_at_each_step_loses_nothing
  `reindex --full` (a search waiting) .... test_kill_during_full_reindex_while_a_search_waits
  post-reply upkeep of `chat` ............ test_kill_during_chat_upkeep_keeps_both_turns
  stale `.git/*.lock` ..................... test_stale_git_locks_of_a_killed_git_are_recovered,
                                           test_git_failure_is_one_line_naming_the_cause
  stale `.memvault/lock` ................. every kill test (flock dies with its process)
Hostile input
  broken YAML, not a mapping, no id, bad date, binary, non-UTF-8, 0-byte file
                                           test_every_broken_file_is_named_on_its_own_line,
                                           test_reindex.py::test_broken_file_is_named_skipped_and_the_rest_syncs,
                                           test_files.py::test_unreadable_files_name_the_file_and_reason
  two files claiming one id .............. test_reindex.py::test_two_files_claiming_one_id
  10 MB body ............................. test_ten_megabyte_body_is_refused_with_the_limit,
                                           test_add.py::test_huge_text_is_refused_with_the_limit
  empty / whitespace-only stdin .......... test_add.py::test_empty_input_is_one_line_exit_1_nothing_written,
                                           test_empty_chat_message_is_one_line
  conversation ids ../../etc, /abs, a/b, NUL, 300 chars, mixed Unicode
                                           test_hostile_conversation_ids_in_every_command,
                                           test_odd_conversation_ids_stay_inside_the_vault_in_chat,
                                           test_add.py::test_hostile_conversation_ids_exit_2_and_write_nothing,
                                           test_add.py::test_odd_but_valid_conversation_ids_are_stored_safely,
                                           test_files.py::test_odd_conversation_ids_stay_inside_entries
  symlink in entries/ pointing outside ... test_symlinks_in_entries_are_never_followed,
                                           test_files.py::test_symlinks_are_not_followed
  vault path that is a file .............. test_vault_path_that_is_a_file_in_every_command,
                                           test_add.py::test_vault_path_that_is_a_file
  read-only vault ........................ test_read_only_vault_can_still_be_searched,
                                           test_add.py::test_read_only_vault_is_one_clear_line
  corrupt or deleted .memvault/ .......... test_deleted_sidecar_is_rebuilt_with_a_notice,
                                           test_lost_state_never_leaves_stray_rows,
                                           test_damaged_index_data_is_named_and_reindex_repairs_it,
                                           test_reindex.py::test_corrupt_or_deleted_sidecar_is_rebuilt
  index built with another model ......... test_reindex.py::test_index_built_with_another_model_is_rebuilt
  LLM: garbage ........................... test_chat.py::test_garbage_is_retried_then_nothing_is_invented
       truncated JSON .................... test_chat_survives_truncated_json
       unknown ids ....................... the model is shown no ids: reconciliation asks about pairs
                                           (test_extraction.py::
                                               test_reconcile_asks_one_question_per_pair_without_ids);
                                           an answer it cannot use keeps the memory (test_extraction.py::
                                               test_reconcile_invalid_answer_keeps_the_memory)
       timeout ........................... test_chat_timeout_is_one_line_and_keeps_the_user_turn
       HTTP 500 .......................... test_chat_http_500_in_upkeep_keeps_the_reply
       connection refused ................ test_chat.py::test_chat_with_endpoint_down_keeps_the_user_turn
Security
  no path escapes the vault .............. the symlink, conversation id and vault path tests above
  no shell=True .......................... test_no_shell_anywhere
  API keys never in output or logs ....... test_api_key_never_reaches_output_files_or_history,
                                           test_llm.py::test_http_error_never_echoes_the_key
  no telemetry, no network unless an LLM is configured
                                           test_no_network_unless_an_llm_is_configured,
                                           test_search.py::test_read_path_makes_no_network_connection,
                                           test_models.py::test_default_embedder_uses_no_network_and_no_telemetry
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import git, run_cli, seed, stop_process, wait_for_line
from conftest import start_memvault as start
from memvault.store import files
from memvault.store.index import Index
from memvault.store.vault import Vault

SECRET = "sk-test-SECRET-4242-do-not-print"


# -- helpers -------------------------------------------------------------------------------


def add(*texts: str, conversation: str = "global") -> list[str]:
    return [m.id for m in seed(*texts, conversation=conversation)]


def assert_intact(vault_dir: Path) -> None:
    """Every file under entries/ is a whole memory, or a temp file that is never read as one."""
    memories = set(files.walk_entries(vault_dir, include_deleted=True))
    for path in sorted((vault_dir / "entries").rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        if path in memories:
            memory, adopted = files.read_memory(path, vault_dir)  # raises on a half-written file
            assert not adopted and memory.text.strip(), path
        else:
            assert path.name.startswith(".") and path.name.endswith(".tmp"), f"stray file {path}"
            assert not files.is_memory_file(path)


def index_rows(vault_dir: Path) -> dict[str, str]:
    """path -> id of every row in the LanceDB table."""
    table = Index(Vault(vault_dir)).table()
    if table is None:
        return {}
    data = table.search().select(["path", "id"]).limit(None).to_arrow().to_pydict()
    assert len(data["path"]) == len(set(data["path"])), "a path has two rows"
    return dict(zip(data["path"], data["id"]))


def assert_converges(vault_dir: Path, must_have: set[str]) -> None:
    """`reindex` then `reindex --check` exit 0; index == files; git clean and sound; search finds all."""
    done = run_cli("reindex")
    assert done.exit_code == 0, done.stderr
    assert "Traceback" not in done.stderr
    check = run_cli("reindex", "--check")
    assert check.exit_code == 0, check.stdout + check.stderr
    live = {p.relative_to(vault_dir).as_posix(): files.read_memory(p, vault_dir)[0]
            for p in files.walk_entries(vault_dir)}
    assert index_rows(vault_dir) == {rel: m.id for rel, m in live.items()}
    texts = {m.text for m in live.values()}
    assert must_have <= texts, f"lost: {must_have - texts}"
    assert git(vault_dir, "status", "--porcelain") == ""
    tracked = set(git(vault_dir, "ls-files", "entries").splitlines())
    assert set(live) <= tracked
    fsck = subprocess.run(["git", "-C", str(vault_dir), "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0 and "error" not in fsck.stderr.lower(), fsck.stderr
    facts = {m.text for m in live.values() if m.role == "memory"}
    found = run_cli("search", "--json", "--no-rerank", "-a", "-k", str(len(live) + 5), "memory")
    assert found.exit_code == 0, found.stderr
    assert facts <= {r["text"] for r in json.loads(found.stdout)}


# -- kills -------------------------------------------------------------------------------------

KILL_POINTS_ADD = [
    "memvault/store/vault.py:change>c:posix.replace",  # the temp file is written and fsynced, not yet renamed
    "memvault/store/state.py:write",                   # file in place, rows in LanceDB, state.db not written
    # 1 ms into `git update-ref` (the sixth process commit_paths starts), which moves HEAD: git
    # dies too, its locks stay
    "memvault/store/gitrepo.py:commit_paths>c:_posixsubprocess.fork_exec;6;0.001",
]
# Then, alone (it leaves its file staged, so an add after it commits through `git commit --only`):
# 2 ms into `git commit-tree`.
KILL_POINT_COMMIT_TREE = "memvault/store/gitrepo.py:commit_paths>c:_posixsubprocess.fork_exec;5;0.002"


@pytest.mark.slow  # an add killed at each step: 10 s of CPU
def test_kill_add_at_each_step_loses_nothing(vault_dir):
    kept = {"memory kept before the kills: the user keeps bees"}
    add(*kept)
    # Started at once: each waits for the vault lock its predecessor died holding.
    procs = [start("add", f"memory {n} written while being killed at {point}", env={"KILL_AT": point})
             for n, point in enumerate(KILL_POINTS_ADD)]
    try:
        for proc, point in zip(procs, KILL_POINTS_ADD):
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == -signal.SIGKILL, f"never reached {point}: {proc.returncode} {err}"
        proc = start("add", "memory 3 written while being killed in git commit-tree",
                     env={"KILL_AT": KILL_POINT_COMMIT_TREE})
        procs.append(proc)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, f"never reached {KILL_POINT_COMMIT_TREE}: {proc.returncode} {err}"
    finally:
        for proc in procs:
            stop_process(proc)
    assert_intact(vault_dir)
    after = run_cli("add", "memory added after the kills: the next command recovers")
    assert after.exit_code == 0, after.stderr
    kept.add("memory added after the kills: the next command recovers")
    assert_converges(vault_dir, kept)
    # The memories whose file was in place when the process died are kept and committed too.
    texts = {m.text for m in Vault(vault_dir).iter_memories()}
    assert "memory 1 written while being killed at memvault/store/state.py:write" in texts


@pytest.mark.slow  # end to end: a `reindex --full` paused and killed while a search waits (~10 s here)
def test_kill_during_full_reindex_while_a_search_waits(vault_dir):
    texts = {"memory: the user keeps bees", "memory: the user rows on Sundays", "memory: the user reads Tolstoy"}
    add(*texts)
    proc = start("reindex", "--full", env={"PAUSE_AT": "memvault/store/models.py:embed;1;600"})
    try:
        wait_for_line(proc, "pause_at")  # old index gone, new table empty, vault lock held
        outcome: dict = {}
        searcher = threading.Thread(target=lambda: outcome.update(
            result=run_cli("search", "--json", "--no-rerank", "-k", "10", "memory")))
        searcher.start()
        time.sleep(1.5)
        waited = searcher.is_alive()
        os.killpg(proc.pid, signal.SIGKILL)  # the crash this test is about
    finally:
        stop_process(proc)
    searcher.join(timeout=300)
    result = outcome["result"]
    assert result.exit_code == 0, result.stderr
    assert {r["text"] for r in json.loads(result.stdout)} == texts, "search read a half-built index"
    assert waited, "search did not wait for the rebuild"
    assert_intact(vault_dir)
    assert_converges(vault_dir, texts)


@pytest.mark.slow  # end to end: a chat killed in its upkeep, then the next command
def test_kill_during_chat_upkeep_keeps_both_turns(vault_dir, llm_env):
    add("memory: the user has a dog named Rex")
    llm_env.push("Nice to meet you, Tom.", {"delay": 120})  # the reply, then an extraction that hangs
    proc = start("chat", "--no-stream", "My name is Tom and I live in Porto")
    try:
        deadline = time.time() + 180
        while not any("response_format" in r for r in llm_env.requests):  # upkeep has started
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)  # the crash this test is about
    finally:
        stop_process(proc)
    out, _ = proc.communicate(timeout=60)
    assert "Nice to meet you, Tom." in out  # the reply was out before upkeep began
    assert_intact(vault_dir)
    turns = {m.role: m.text for m in Vault(vault_dir).iter_memories(roles=("user", "assistant"))}
    assert turns == {"user": "My name is Tom and I live in Porto", "assistant": "Nice to meet you, Tom."}
    assert_converges(vault_dir, {"memory: the user has a dog named Rex", *turns.values()})
    llm_env.push("Hello again.", json.dumps({"facts": []}))
    again = run_cli("chat", "--no-stream", "Do you remember where I live?")
    assert again.exit_code == 0, again.stderr


def _jsonl(path: Path, n: int, what: str) -> list[str]:
    texts = [f"memory {i}: the user {what} line {i} of {n}" for i in range(n)]
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return texts


def _untracked_memories(vault_dir: Path) -> list[str]:
    return [line for line in git(vault_dir, "status", "--porcelain", "--untracked-files=all", "entries").splitlines()
            if line.endswith(".md")]


@pytest.mark.slow  # end to end: an `add --jsonl` killed half way, then run again
def test_a_killed_add_jsonl_leaves_nothing_and_its_rerun_stores_each_text_once(vault_dir, tmp_path):
    """SIGKILL half way through the writes of a 150-line `add --jsonl` (issue 44): the next command takes the
    change back (docs/design.md, "Commits": a killed change), so the same command run again stores each text once,
    in one commit, and no file of the killed run is left for a reindex to commit as hand edits."""
    add("memory: the user keeps bees")
    lines = tmp_path / "bulk.jsonl"
    texts = _jsonl(lines, 150, "imported")
    proc = start("add", "--jsonl", str(lines), env={"KILL_AT": "memvault/store/files.py:write_memory;60"})
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        stop_process(proc)
    assert proc.returncode == -signal.SIGKILL, err
    assert len(_untracked_memories(vault_dir)) == 59  # what the kill left: whole files, not committed
    assert_intact(vault_dir)
    again = run_cli("add", "--jsonl", str(lines))
    assert again.exit_code == 0, again.stderr
    stored = [m.text for m in Vault(vault_dir).iter_memories()]
    assert sorted(stored) == sorted([*texts, "memory: the user keeps bees"])  # each text once
    assert "took back the change memvault add" in again.stderr and "59 file(s) it had written removed" in again.stderr
    assert git(vault_dir, "log", "-1", "--format=%s").strip() == "memvault add: 150 memories (global)"
    assert_converges(vault_dir, set(texts))
    assert "hand edit" not in git(vault_dir, "log", "--format=%s")


@pytest.mark.slow  # end to end: an `add --jsonl` killed before its commit, then the next command
def test_a_killed_add_jsonl_that_had_written_everything_is_committed_by_the_next_command(vault_dir, tmp_path):
    """Killed once every line is written, inside its commit: the next command, whatever it is (a search),
    finishes the change as the add's own commit; its rerun then finds every text stored."""
    add("memory: the user keeps bees")
    lines = tmp_path / "bulk.jsonl"
    texts = _jsonl(lines, 40, "wrote down")
    point = "memvault/store/gitrepo.py:commit_paths>c:_posixsubprocess.fork_exec;1;0.002"  # in git update-index
    proc = start("add", "--jsonl", str(lines), env={"KILL_AT": point})
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        stop_process(proc)
    assert proc.returncode == -signal.SIGKILL, err
    found = run_cli("search", "--no-rerank", "line 7 of 40")
    assert git(vault_dir, "log", "-1", "--format=%s").strip() == "memvault add: 40 memories (global)"
    assert git(vault_dir, "status", "--porcelain") == ""
    assert found.exit_code == 0 and "finished the change memvault add" in found.stderr, found.stderr
    again = run_cli("add", "--jsonl", str(lines))
    assert again.exit_code == 0 and again.stderr.count("already stored") == 40, again.stderr
    assert_converges(vault_dir, set(texts))


def _old_lock(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    past = time.time() - 60
    os.utime(path, (past, past))


def test_stale_git_locks_of_a_killed_git_are_recovered(vault_dir):
    add("memory: before the crash")
    branch = git(vault_dir, "symbolic-ref", "--short", "HEAD").strip()
    locks = [vault_dir / ".git/index.lock", vault_dir / ".git/HEAD.lock", vault_dir / f".git/refs/heads/{branch}.lock"]
    for lock in locks:
        _old_lock(lock)
    result = run_cli("add", "memory: after an old crash")
    assert result.exit_code == 0, result.stderr
    # A git killed a moment ago: its locks are young, and the very next command still recovers.
    for lock in locks:
        lock.write_bytes(b"")
    result = run_cli("add", "memory: right after a crash")
    assert result.exit_code == 0, result.stderr
    assert not any(lock.exists() for lock in locks)
    assert "memory: right after a crash" in git(vault_dir, "show", "HEAD")
    assert_converges(vault_dir, {"memory: before the crash", "memory: after an old crash",
                                 "memory: right after a crash"})


def test_git_failure_is_one_line_naming_the_cause(vault_dir):
    add("memory: first")
    branch = git(vault_dir, "symbolic-ref", "--short", "HEAD").strip()
    stuck = vault_dir / f".git/refs/heads/{branch}.lock"
    stuck.mkdir()  # a lock that is not a file cannot be cleared: git must fail, and say why
    os.utime(stuck, (time.time() - 60, time.time() - 60))
    try:
        result = run_cli("add", "memory: second")
    finally:
        stuck.rmdir()
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{branch}.lock" in result.stderr, result.stderr
    # Not lost: the file is written, and the next command commits it.
    assert run_cli("add", "memory: third").exit_code == 0
    assert_converges(vault_dir, {"memory: first", "memory: second", "memory: third"})


# -- concurrent writers ---------------------------------------------------------------------------


@pytest.mark.slow  # writers, a watcher and searches at once: 9 s of CPU
def test_add_racing_watch_and_search_loses_nothing(vault_dir):
    add("memory: the vault exists before the race")
    watcher = start("reindex", "--watch")
    procs = []
    try:
        wait_for_line(watcher, "watching")
        texts = [f"memory {i}: racing writer number {i}" for i in range(3)]
        procs += [start("add", "-c", f"c{i % 2}", t) for i, t in enumerate(texts)]
        procs.append(start("search", "--json", "--no-rerank", "-a", "racing writer"))
        note = vault_dir / "entries/global/notes/by-hand.md"  # an edit by hand in the middle of it
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text("memory: written by hand during the race\n")
        results = [(p.args[2:], *p.communicate(timeout=600), p.returncode) for p in procs]
        for args, out, err, code in results:
            assert code == 0 and "Traceback" not in err, (args, err)
        deadline = time.time() + 120  # the watcher catches up
        while git(vault_dir, "status", "--porcelain") or run_cli("reindex", "--check").exit_code:
            assert time.time() < deadline, "the watcher did not settle"
            time.sleep(0.5)
    finally:
        for proc in procs:
            stop_process(proc)
        stop_process(watcher, timeout=60)
    _, werr = watcher.communicate(timeout=60)
    assert watcher.returncode == 0 and "Traceback" not in werr, werr  # it stopped cleanly on SIGTERM
    log = git(vault_dir, "log", "--format=%b")
    for out in (out for args, out, _, _ in results if args[0] == "add"):
        memory_id = out.split()[0]
        assert f"Memvault-Added: {memory_id}" in log
    assert_converges(vault_dir, {*texts, "memory: written by hand during the race"})


# -- hostile input ---------------------------------------------------------------------------------

BROKEN = {
    "yaml.md": ("---\nid: [unclosed\nrole: memory\n---\nx\n", "front matter is not valid YAML"),
    "list.md": ("---\n- a\n- b\n---\nx\n", "not a mapping"),
    "noid.md": ("---\nrole: memory\ncreated_at: 2024-01-01T00:00:00Z\n---\n", "front matter has no 'id'"),
    "date.md": ("---\nid: d1\nrole: memory\ncreated_at: last tuesday\n---\nx\n", "is not an ISO 8601 date-time"),
    "binary.md": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
    "latin1.md": ("caf\xe9 au lait\n".encode("latin-1"), "not UTF-8"),
    "empty.md": (b"", "empty file"),
}


def test_every_broken_file_is_named_on_its_own_line(vault_dir, tmp_path):
    add("memory: the user collects stamps")
    folder = vault_dir / "entries/global/facts"
    for name, (content, _) in BROKEN.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    result = run_cli("reindex")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    for name, (_, reason) in BROKEN.items():
        mine = [line for line in lines if str(folder / name) in line]
        assert len(mine) == 1 and reason in mine[0] and mine[0].startswith("memvault: error: skipped"), (name, lines)
    for name, (content, _) in BROKEN.items():  # reported, never rewritten or deleted
        assert (folder / name).read_bytes() == (content if isinstance(content, bytes) else content.encode())
    found = run_cli("search", "--json", "stamps")
    assert found.exit_code == 0 and json.loads(found.stdout)[0]["text"] == "memory: the user collects stamps"


@pytest.mark.slow  # end to end: a 10 MiB body sent to a server
def test_ten_megabyte_body_is_refused_with_the_limit(vault_dir, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("x" * (10 * 1024 * 1024))
    result = run_cli("add", "--file", str(big))
    assert result.exit_code == 2 and "the limit is 1 MiB" in result.stderr and result.stderr.count("\n") == 1
    assert not vault_dir.exists()
    add("memory: small and fine")
    dropped = vault_dir / "entries/global/notes/huge.md"
    dropped.parent.mkdir(parents=True)
    dropped.write_text("y" * (10 * 1024 * 1024))
    result = run_cli("reindex")
    assert result.exit_code == 1
    assert f"skipped {dropped}: file is 10.0 MiB; the limit is 1 MiB" in result.stderr
    assert dropped.stat().st_size == 10 * 1024 * 1024  # left alone
    # A chat message is the model's to take (issue 41): sent whole, stored as far as a memory holds. Its secret
    # scan is in windows (a 10 MiB line took the scan over 20 minutes); the LLM is down here: one line says so.
    chat = run_cli("chat", "-c", "big", input="z" * (10 * 1024 * 1024))
    assert chat.exit_code == 1 and "is unreachable" in chat.stderr.splitlines()[-1]


def test_empty_chat_message_is_one_line(vault_dir):
    for stdin in ("", "  \n\t\n"):
        result = run_cli("chat", input=stdin)
        assert result.exit_code == 1 and result.stderr == "memvault: error: nothing to send: the message is empty\n"


@pytest.mark.parametrize("command", [
    ["add", "text"], ["search", "query"], ["chat", "hello"], ["chat", "--context"], ["reconcile"], ["summarize"],
])
@pytest.mark.parametrize("conversation", ["../../etc", "a/../../b", "nul\x00byte", ".."])
def test_hostile_conversation_ids_in_every_command(vault_dir, tmp_path, command, conversation):
    result = run_cli(command[0], "-c", conversation, *command[1:])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("memvault: error: conversation id") and result.stderr.count("\n") == 1
    assert not (tmp_path / "etc").exists() and not vault_dir.exists()


def test_odd_conversation_ids_stay_inside_the_vault_in_chat(vault_dir, llm_env):
    llm_env.default = json.dumps({"facts": []})
    for conversation in ["/abs", "a/b", "y" * 300, "Ça va ☕ 你好 ﷽"]:
        llm_env.push("ok")
        result = run_cli("chat", "--no-stream", "-c", conversation, "hello there, I am Tom")
        assert result.exit_code == 0, result.stderr
    for path in files.walk_entries(vault_dir):
        assert path.resolve().is_relative_to((vault_dir / "entries").resolve())
        assert len(path.relative_to(vault_dir / "entries").parts[0]) <= 64
    conversations = {m.conversation_id for m in Vault(vault_dir).iter_memories()}
    assert conversations == {"/abs", "a/b", "y" * 300, "Ça va ☕ 你好 ﷽"}


def test_symlinks_in_entries_are_never_followed(vault_dir, tmp_path):
    add("memory: the user keeps bees")
    outside = tmp_path / "outside"
    (outside / "turns/user").mkdir(parents=True)
    secret_turn = outside / "turns/user/t.md"
    secret_turn.write_text("---\nid: 11111111-1111-4111-8111-111111111111\nrole: user\nconversation_id: evil\n"
                           "created_at: 2026-01-01T00:00:00Z\n---\nTOP SECRET outside the vault\n")
    secret_note = outside / "note.md"
    secret_note.write_text("TOP SECRET note without front matter\n")
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    (vault_dir / "entries/evil").symlink_to(outside, target_is_directory=True)
    (vault_dir / "entries/global/facts/link.md").symlink_to(secret_note)

    result = run_cli("reindex")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    for link in ("entries/evil", "entries/global/facts/link.md"):
        mine = [line for line in result.stderr.splitlines() if str(vault_dir / link) in line]
        assert len(mine) == 1 and "symbolic link (not followed)" in mine[0], result.stderr
    found = run_cli("search", "--json", "-a", "TOP SECRET")
    assert "TOP SECRET" not in found.stdout
    context = run_cli("chat", "--context", "-c", "evil")
    assert "TOP SECRET" not in context.stdout + context.stderr
    written = run_cli("add", "-c", "evil", "memory: would land outside")
    assert written.exit_code == 2 and "outside the vault" in written.stderr and written.stderr.count("\n") == 1
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before  # untouched, not adopted


@pytest.mark.parametrize("command", [["add", "x"], ["search", "x"], ["reindex"], ["reindex", "--check"],
                                     ["log"], ["chat", "--context"], ["show", "abcd"]])
def test_vault_path_that_is_a_file_in_every_command(tmp_path, command):
    target = tmp_path / "afile"
    target.write_text("precious")
    result = run_cli("--vault", str(target), *command)
    assert result.exit_code == 2
    assert result.stderr == f"memvault: error: vault path {target} exists and is not a folder\n"
    assert target.read_text() == "precious"


@pytest.mark.slow  # end to end: a cold search in a read-only vault (a child process, the vault mounted read-only)
def test_read_only_vault_can_still_be_searched(vault_dir):
    from test_add import run_on_read_only_vault

    add("memory: the user keeps bees")
    result = run_on_read_only_vault(vault_dir, "search", "--no-rerank", "bees", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "the user keeps bees" in result.stdout
    assert "Traceback" not in result.stderr and "read-only" in result.stderr


def test_deleted_sidecar_is_rebuilt_with_a_notice(vault_dir):
    add("memory: the user bakes bread")
    shutil.rmtree(vault_dir / ".memvault")
    result = run_cli("search", "--json", "bread")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["text"] == "memory: the user bakes bread"
    assert "memvault: no index" in result.stderr and str(vault_dir / ".memvault") in result.stderr
    assert_converges(vault_dir, {"memory: the user bakes bread"})


def test_lost_state_never_leaves_stray_rows(vault_dir):
    add("memory: the user likes tea", "memory: the user has a cat named Tom")
    (vault_dir / ".memvault/state.db").unlink()
    cat = next(m for m in Vault(vault_dir).iter_memories() if "cat" in m.text)
    cat.path.unlink()  # removed while the index had no state to notice it by
    result = run_cli("search", "--json", "--no-rerank", "cat")
    assert result.exit_code == 0, result.stderr
    assert "cat named Tom" not in result.stdout, "search returned a memory whose file is gone"
    assert "state" in result.stderr and "rebuilding" in result.stderr
    assert_converges(vault_dir, {"memory: the user likes tea"})


def test_damaged_index_data_is_named_and_reindex_repairs_it(vault_dir):
    add("memory: the user likes tea", "memory: the user has a cat named Tom")
    for data in (vault_dir / ".memvault/index").rglob("data/*.lance"):
        data.unlink()
    check = run_cli("reindex", "--check")
    assert check.exit_code == 1 and "Traceback" not in check.stderr
    result = run_cli("search", "--no-rerank", "cat")
    assert "Traceback" not in result.stderr
    if result.exit_code:
        assert result.stderr.count("\n") == 1 and "reindex" in result.stderr, result.stderr
    assert_converges(vault_dir, {"memory: the user likes tea", "memory: the user has a cat named Tom"})


# -- the LLM misbehaves, seen through chat ---------------------------------------------------------


def test_chat_survives_truncated_json(vault_dir, llm_env):
    llm_env.push("Hello Tom.", '{"facts": ["The user is na', '{"facts": ["The user')
    result = run_cli("chat", "--no-stream", "My name is Tom")
    assert result.exit_code == 0, result.stderr
    assert "Hello Tom." in result.stdout and "Traceback" not in result.stderr
    assert [m.text for m in Vault(vault_dir).iter_memories(roles=("memory",))] == []
    assert git(vault_dir, "status", "--porcelain") == ""


def test_chat_timeout_is_one_line_and_keeps_the_user_turn(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_LLM_TIMEOUT", "1")
    llm_env.push({"delay": 10})
    started = time.monotonic()
    result = run_cli("chat", "My name is Tom")
    assert time.monotonic() - started < 30
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "within 1s" in result.stderr and "Traceback" not in result.stderr
    assert [m.text for m in Vault(vault_dir).iter_memories(roles=("user",))] == ["My name is Tom"]
    assert git(vault_dir, "status", "--porcelain") == ""


def test_chat_http_500_in_upkeep_keeps_the_reply(vault_dir, llm_env):
    llm_env.push("Hello Tom.", {"status": 500})
    result = run_cli("chat", "--no-stream", "My name is Tom")
    assert result.exit_code == 0, result.stderr
    assert "Hello Tom." in result.stdout
    warnings = [line for line in result.stderr.splitlines() if "upkeep failed" in line]
    assert len(warnings) == 1 and "500" in warnings[0]
    turns = sorted(m.text for m in Vault(vault_dir).iter_memories(roles=("user", "assistant")))
    assert turns == ["Hello Tom.", "My name is Tom"]
    assert git(vault_dir, "status", "--porcelain") == ""


# -- security ------------------------------------------------------------------------------------


def test_no_shell_anywhere():
    package = Path(files.__file__).parent.parent  # memvault/, every layer's folder
    for source in package.rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        for banned in ("shell=True", "os.system(", "os.popen(", "os.exec", "pty.spawn("):
            assert banned not in text, f"{source}: {banned}"


def test_api_key_never_reaches_output_files_or_history(vault_dir, llm_env, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMVAULT_LLM_API_KEY", SECRET)
    llm_env.push("Hello Tom.", json.dumps({"facts": ["The user is named Tom"]}), "Tom.")
    ok = run_cli("-v", "chat", "--no-stream", "My name is Tom")
    llm_env.push({"status": 401, "body": {"error": {"message": f"bad key {SECRET}"}}})
    failed = run_cli("-v", "chat", "--no-stream", "Are you there?")
    assert ok.exit_code == 0 and failed.exit_code == 1
    assert llm_env.headers[0].get("Authorization") == f"Bearer {SECRET}"  # it was used...
    for result in (ok, failed):  # ...and never shown
        assert SECRET not in result.stdout + result.stderr
    assert SECRET not in git(vault_dir, "log", "-p", "--all")
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path


NETWORK_PROBE = r"""
import json, sys
seen = []
def hook(event, args):
    if event == "socket.connect":
        seen.append(repr(args[1]))
    elif event == "socket.getaddrinfo":
        seen.append(repr(args[:2]))
sys.addaudithook(hook)
from memvault.faces.cli import app
report = {}
for name, argv in json.loads(sys.argv[1]):
    start = len(seen)
    try:
        app(argv, standalone_mode=False)
    except SystemExit as exc:
        assert not exc.code, (argv, exc.code)
    report[name] = seen[start:]
import litellm, importlib.util, os
report["litellm.telemetry"] = litellm.telemetry
report["lancedb telemetry module"] = importlib.util.find_spec("lancedb.utils") is not None
report["env"] = {k: os.environ.get(k) for k in ("HF_HUB_DISABLE_TELEMETRY", "DO_NOT_TRACK", "ORT_DISABLE_TELEMETRY",
                                                "LITELLM_LOCAL_MODEL_COST_MAP")}
print("REPORT " + json.dumps(report))
"""


@pytest.mark.slow  # end to end: cold commands under a network guard
def test_no_network_unless_an_llm_is_configured(vault_dir, llm_env, tmp_path):
    """Every socket a real process opens, recorded by an audit hook: only chat reaches the LLM."""
    steps = [
        ("add", ["add", "memory: the user keeps bees"]),
        ("reindex", ["reindex"]),
        ("check", ["reindex", "--check"]),
        ("search", ["search", "bees"]),
        ("chat", ["chat", "--no-stream", "My name is Tom"]),
    ]
    llm_env.push("Hello Tom.", json.dumps({"facts": []}))
    done = subprocess.run([sys.executable, "-c", NETWORK_PROBE, json.dumps(steps)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.split("REPORT ", 1)[1])
    for name in ("add", "reindex", "check", "search"):
        assert report[name] == [], (name, report[name])
    port = llm_env.base_url.rsplit(":", 1)[1].split("/")[0]
    assert report["chat"] and all("127.0.0.1" in c and port in c for c in report["chat"]), report["chat"]
    assert report["litellm.telemetry"] is False and report["lancedb telemetry module"] is False
    assert report["env"] == {"HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "ORT_DISABLE_TELEMETRY": "1",
                             "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
