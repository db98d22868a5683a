"""`memvault add`: every input form, what lands on disk and in git, and bad input."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import git, memvault_command, run_cli, run_memvault, seed
from memvault.store import files
from memvault.store.vault import Vault


def live_memories(vault: Path):
    return [files.read_memory(p, vault)[0] for p in files.walk_entries(vault)]


def test_add_from_arguments_writes_file_commits_and_prints_id(vault_dir):
    result = run_cli("add", "My wife is Anne")
    assert result.exit_code == 0, result.stderr
    memory_id, rel = result.stdout.split()
    memory, _ = files.read_memory(vault_dir / rel, vault_dir)
    assert memory.id == memory_id and memory.text == "My wife is Anne" and memory.role == "memory"
    assert memory.conversation_id == "global" and memory.created_at.tzinfo is not None
    log = git(vault_dir, "log", "--format=%s%n%b")
    assert "memvault add: 1 memory (global)" in log
    assert f"Memvault-Added: {memory_id}" in log
    assert git(vault_dir, "status", "--porcelain") == ""
    assert ".memvault/" in (vault_dir / ".gitignore").read_text()
    assert ".memvault" not in git(vault_dir, "ls-files")


def test_several_arguments_are_refused_and_nothing_is_stored(vault_dir):
    """Issue 44: `add "A" "B"` stored one memory "A B". One text, one argument; --help says so."""
    seed("The user keeps bees")
    for args in (["I like tea", "I live in Lisbon"], ["My", "wife", "is", "Anne"]):
        result = run_cli("add", *args)
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr == (f"memvault: error: add takes the text as one argument and got {len(args)}: quote it "
                                 "(memvault add \"...\") for one memory; for several, one per line with --each-line "
                                 "(or --jsonl)\n")
    assert [m.text for m in live_memories(vault_dir)] == ["The user keeps bees"]
    assert "Several arguments are an error (exit 2, nothing stored)" in " ".join(run_cli("add", "--help").stdout.split())
    assert run_cli("add", "--each-line", input="I like tea\nI live in Lisbon\n").exit_code == 0
    assert len(live_memories(vault_dir)) == 3


def test_add_from_stdin_and_dash(vault_dir):
    assert run_cli("add", input="piped note\n").exit_code == 0
    assert run_cli("add", "-", input="dash note").exit_code == 0
    assert sorted(m.text for m in live_memories(vault_dir)) == ["dash note", "piped note"]


def test_add_file_each_line_strips_list_markers(vault_dir, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("- likes tea\n* drinks coffee\n\n1. walks daily\n- [x] owns a bike\n   \n")
    result = run_cli("add", "--file", str(notes), "--each-line", "-c", "habits", "--tag", "daily")
    assert result.exit_code == 0, result.stderr
    memories = live_memories(vault_dir)
    assert sorted(m.text for m in memories) == ["drinks coffee", "likes tea", "owns a bike", "walks daily"]
    assert all(m.conversation_id == "habits" and m.tags == ["daily"] for m in memories)
    assert "memvault add: 4 memories (habits)" in git(vault_dir, "log", "-1", "--format=%s")


def test_add_kinds_and_decision_fields(vault_dir):
    result = run_cli("add", "--json", "--kind", "decision", "--rationale", "cheaper", "--alternative", "AWS",
                     "--alternative", "GCP", "--source", "meeting 3", "Use Hetzner for hosting")
    data = json.loads(result.stdout)
    assert data[0]["role"] == "decision"
    assert data[0]["meta"] == {"source": "meeting 3", "rationale": "cheaper", "alternatives": ["AWS", "GCP"]}
    assert data[0]["path"].startswith("entries/global/decisions/")
    result = run_cli("add", "--json", "--kind", "note", "a research note")
    assert json.loads(result.stdout)[0]["path"].startswith("entries/global/notes/")


def test_add_jsonl_keeps_meta_and_times(vault_dir, tmp_path):
    lines = [
        {"text": "Caroline: I went to a support group", "conversation_id": "conv-26",
         "created_at": "2023-05-08T13:56:00", "meta": {"memory_id": "conv-26:D1:3"}},
        {"text": "a decision", "kind": "decision", "tags": ["x"], "rationale": "because"},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    result = run_cli("add", "--jsonl", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert {k for k in out[0]} >= {"id", "path", "role", "conversation_id", "created_at", "text"}
    assert out[0]["created_at"].startswith("2023-05-08T13:56:00") and out[0]["created_at"].endswith("+00:00")
    assert out[0]["meta"]["memory_id"] == "conv-26:D1:3"
    assert out[0]["path"].startswith("entries/conv-26/facts/20230508T135600")
    assert out[1]["role"] == "decision" and out[1]["conversation_id"] == "global"
    assert run_cli("add", "--jsonl", "-", input=json.dumps({"text": "from stdin"})).exit_code == 0


@pytest.mark.slow  # 16 s of CPU: thousands of memories embedded
def test_add_jsonl_of_thousands_is_one_commit_naming_each(vault_dir, tmp_path):
    """4,000 memories at once: the commit message names every id (over 200 KiB), more than Linux
    lets one argument be (128 KiB), and once failed with "Argument list too long" after every file
    was written. Real `add --jsonl` on purpose: about 20 s here, most of it embedding."""
    path = tmp_path / "bulk.jsonl"
    path.write_text("".join(json.dumps({"text": f"bulk memory number {n}"}) + "\n" for n in range(4000)))
    result = run_cli("add", "--jsonl", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    ids = [m["id"] for m in json.loads(result.stdout)]
    assert len(git(vault_dir, "log", "-1", "--format=%B").encode()) > 200 * 1024
    assert git(vault_dir, "log", "-1", "--format=%s") == "memvault add: 4000 memories (global)\n"
    trailers = git(vault_dir, "log", "-1", "--format=%(trailers:key=Memvault-Added,valueonly)").split()
    assert trailers == ids
    assert git(vault_dir, "status", "--porcelain") == ""
    logged = json.loads(run_cli("log", "-n", "1", "--json").stdout)[0]
    assert {c["id"] for c in logged["changes"]} == set(ids)
    assert {c["action"] for c in logged["changes"]} == {"added"}


def test_a_bulk_add_is_written_and_indexed_a_batch_at_a_time_in_one_commit(vault_dir, tmp_path, monkeypatch):
    """A 100,000-line add must not hold every memory, its vector and its row at once: the memories
    are made as they are written and indexed every INDEX_BATCH (here 4), one commit for all, and a
    text repeated across batches is still a duplicate."""
    from memvault.store import index, vault

    monkeypatch.setattr(vault, "INDEX_BATCH", 4)
    indexed = []
    take_in = index.Index.take_in
    monkeypatch.setattr(index.Index, "take_in",
                        lambda self, paths, **kw: indexed.append(len(paths)) or take_in(self, paths, **kw))
    seed("The user keeps bees")
    indexed.clear()
    texts = [f"bulk memory number {n}" for n in range(9)] + ["bulk memory number 2", "The user keeps bees"]
    path = tmp_path / "bulk.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    result = run_cli("add", "--jsonl", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    stored = [m for m in json.loads(result.stdout) if m["stored"]]
    assert sorted(m["text"] for m in stored) == sorted(texts[:9])
    assert "already stored as" in result.stderr and result.stderr.count("already stored as") == 2
    assert indexed == [4, 4, 1]  # batches as they were written, the last one at the end
    assert git(vault_dir, "log", "-1", "--format=%s") == "memvault add: 9 memories (global)\n"
    assert git(vault_dir, "status", "--porcelain") == ""
    assert run_cli("reindex", "--check").exit_code == 0
    found = json.loads(run_cli("search", "--json", "-k", "3", "bulk memory number 7").stdout)
    assert found[0]["text"] == "bulk memory number 7"


def test_add_jsonl_prints_each_memory_as_its_file_holds_it(vault_dir, tmp_path):
    """A bulk add keeps only the id and file of each memory it stored (not its text) and prints
    them from there: the output is still one `id  path` line per stored memory, and --json still
    what each file holds, whatever the line carried. A text may hold U+2028 or U+0085 as it is (JSON
    allows them): it is one line, not cut in two as str.splitlines did ("not valid JSON")."""
    seed("The user keeps bees")
    lines = [{"text": "a decision", "kind": "decision", "tags": ["x", "y"], "rationale": "because"},
             {"text": "Anne: see you\u2028tomorrow\u0085at nine", "role": "user", "conversation_id": "chat-1",
              "created_at": "2023-05-08T13:56:00", "meta": {"memory_id": "c1:D1:3", "n": 3}},
             {"text": "The user keeps bees"},
             {"text": "a note", "kind": "note", "source": "https://example.org"}]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")

    result = run_cli("add", "--jsonl", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    on_disk = {m.id: m for m in live_memories(vault_dir)}
    assert [row["stored"] for row in rows] == [True, True, True, False]  # the bees were there already
    for row in rows:
        assert {**on_disk[row["id"]].to_json(vault_dir), "stored": row["stored"]} == row
    assert rows[1]["text"] == "Anne: see you\u2028tomorrow\u0085at nine" and rows[1]["meta"]["n"] == 3
    assert [row["text"] for row in rows[:3]] == ["a decision", lines[1]["text"], "a note"]
    assert "already stored as" in result.stderr

    plain = run_cli("add", "--jsonl", "-", "--allow-duplicate",
                    input="".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    assert plain.exit_code == 0, plain.stderr
    printed = [line.split("  ") for line in plain.stdout.splitlines()]
    assert len(printed) == 4
    for memory_id, rel in printed:
        assert files.read_memory(vault_dir / rel, vault_dir)[0].id == memory_id
    assert git(vault_dir, "log", "-1", "--format=%s") == "memvault add: 4 memories (chat-1, global)\n"


@pytest.mark.slow  # a scale measurement: 700 memory files of ~3,800 characters under tracemalloc (~28 s here)
def test_what_a_bulk_add_holds_does_not_grow_with_its_texts(vault_dir, monkeypatch):
    """What `add_jsonl` holds while it runs and returns grows with the number of lines by a few
    hundred bytes each (an id, a file name, a duplicate key), not by their texts: a 100,000-line
    add held every memory three times until it ended (814 MB peak, bench/README.md). Lines of
    ~3,800 characters, 100 and then 600 of them: per extra line, what the result holds stays under
    1,000 bytes and the peak under 3,000 (before: 4,800 and 9,100). Python's own allocations
    (tracemalloc); the index is left out (auto_index off, as `reindex` runs it) because embedding
    is not what this measures and 600 embeddings would cost the suite a minute: bench/scale.py
    measures a whole build's peak RSS."""
    import gc
    import tracemalloc

    import memvault
    from memvault.store import vault as vault_module

    monkeypatch.setattr(vault_module, "INDEX_BATCH", 64)  # memories are made, checked and written 64 at a time

    def measure(n: int, root: Path):
        vault = memvault.open_vault(root)
        vault._vault.auto_index = False
        vault.add_jsonl(json.dumps({"text": "warm up"}))  # imports and the repository, not measured
        text = "".join(json.dumps({"text": f"line {i}: " + "the user keeps bees and walks the dog " * 100,
                                   "conversation_id": "work"}) + "\n" for i in range(n))
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            added = vault.add_jsonl(text, "lines.jsonl")
            held, peak = (value - start for value in tracemalloc.get_traced_memory())
        finally:
            tracemalloc.stop()
        assert len(added) == n and added.commit
        first = added[0].read()  # the whole memory, from its file
        assert first.text.startswith("line 0: the user keeps bees") and added[0].path == first.path
        return held, peak

    small = measure(100, vault_dir.parent / "small")
    large = measure(600, vault_dir.parent / "large")
    held_per_line, peak_per_line = ((b - a) / 500 for a, b in zip(small, large))
    assert held_per_line < 1000, f"{held_per_line:.0f} bytes held per line"
    assert peak_per_line < 3000, f"{peak_per_line:.0f} bytes of peak per line"


@pytest.mark.parametrize("content, message", [
    ('{"text": "ok"}\nnot json\n', "line 2: not valid JSON"),
    ('{"text": ""}\n', "line 1: 'text' must be a non-empty string"),
    ('{"text": "a", "colour": "red"}\n', "line 1: unknown key 'colour'"),
    ('{"text": "a", "created_at": "yesterday"}\n', "line 1: created_at"),
    ('{"text": "a", "meta": {"id": "x"}}\n', "line 1: 'meta' may not set 'id'"),
])
def test_bad_jsonl_writes_nothing(vault_dir, content, message):
    result = run_cli("add", "--jsonl", "-", input=content)
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not vault_dir.exists() or live_memories(vault_dir) == []


@pytest.mark.parametrize("stdin", ["", "   \n\t\n"])
def test_empty_input_is_one_line_exit_1_nothing_written(vault_dir, stdin):
    result = run_cli("add", input=stdin)
    assert result.exit_code == 1
    assert result.stderr == "memvault: error: nothing to add: the text is empty\n"
    assert not vault_dir.exists()


def test_non_utf8_stdin_is_refused(vault_dir):
    result = run_cli("add", input=b"caf\xe9")
    assert result.exit_code == 2 and "stdin is not UTF-8" in result.stderr


@pytest.mark.parametrize("conversation", ["../../etc", "a/../../b", "nul\x00byte"])
def test_hostile_conversation_ids_exit_2_and_write_nothing(vault_dir, tmp_path, conversation):
    result = run_cli("add", "-c", conversation, "text")
    assert result.exit_code == 2
    assert result.stderr.startswith("memvault: error: conversation id") and result.stderr.count("\n") == 1
    assert not vault_dir.exists()
    assert not (tmp_path / "etc").exists()


def test_odd_but_valid_conversation_ids_are_stored_safely(vault_dir):
    for conversation in ["/abs", "a/b", "y" * 300, "Ça va ☕"]:
        result = run_cli("add", "-c", conversation, "--json", "text")
        assert result.exit_code == 0, result.stderr
        data = json.loads(result.stdout)[0]
        assert data["conversation_id"] == conversation
        assert (vault_dir / data["path"]).resolve().is_relative_to(vault_dir / "entries")


def test_huge_text_is_refused_with_the_limit(vault_dir):
    result = run_cli("add", input="x" * (files.MAX_MEMORY_BYTES + 10))
    assert result.exit_code == 2 and "the limit is 1 MiB" in result.stderr
    assert not vault_dir.exists()


def test_vault_path_that_is_a_file(tmp_path):
    target = tmp_path / "afile"
    target.write_text("precious")
    result = run_cli("--vault", str(target), "add", "x")
    assert result.exit_code == 2
    assert result.stderr == f"memvault: error: vault path {target} exists and is not a folder\n"
    assert target.read_text() == "precious"


def run_on_read_only_vault(vault: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run memvault with the vault read-only for real; skips the test where that cannot be done.

    As root, permission bits do not bind, so a private mount namespace (unshare -rm)
    bind-mounts the vault read-only; as another user, chmod is enough (and is undone after).
    """
    command = memvault_command()
    if os.geteuid() != 0:
        argv = [*command, *args]
    elif shutil.which("unshare") and subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0:
        script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
        argv = ["unshare", "-rm", "sh", "-c", script, "sh", str(vault), *command, *args]
    else:
        pytest.skip("no way to make a read-only vault here (root without unshare)")
    if os.geteuid() != 0:
        for path in [vault, *vault.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    finally:
        for path in [vault, *vault.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def test_read_only_vault_is_one_clear_line(vault_dir):
    assert run_cli("add", "first").exit_code == 0
    before = git(vault_dir, "rev-parse", "HEAD")
    result = run_on_read_only_vault(vault_dir, "add", "second")
    assert result.returncode == 1, result.stderr
    assert "not writable" in result.stderr and str(vault_dir) in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert git(vault_dir, "rev-parse", "HEAD") == before
    assert [m.text for m in live_memories(vault_dir)] == ["first"]


def test_commits_as_memvault_when_git_has_no_identity(vault_dir, tmp_path, monkeypatch):
    empty = tmp_path / "empty.gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("EMAIL", "")
    result = run_memvault("add", "no identity here", env={"EMAIL": ""})
    assert result.returncode == 0, result.stderr
    assert git(vault_dir, "log", "-1", "--format=%an <%ae>").strip() == "memvault <memvault@localhost>"
    assert git(vault_dir, "config", "--local", "user.email").strip() == "memvault@localhost"
    assert empty.read_text() == ""  # the user's global config is untouched


@pytest.mark.slow  # end to end: a cold `add` whose git commands are logged by a wrapper (~11 s here)
def test_an_add_runs_only_git_s_plumbing(vault_dir, tmp_path):
    """`git update-index` of the new file, then the commit from the index's cached trees
    (write-tree, diff-tree to see that only that file is staged, commit-tree, update-ref), after a
    look for a post-commit hook, through GitPython's command wrapper (plus the two `git version`
    GitPython runs when it is imported): never `git commit`, which re-reads and re-stats the whole
    index (0.4 s of CPU at 100,000 files). An add used to start ten git processes (GitPython's
    version probes and object lookups, two `git var` for the identity, `git status`)."""
    calls = tmp_path / "git-calls"
    shim = tmp_path / "bin" / "git"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\nexec {shutil.which("git")} "$@"\n')
    shim.chmod(0o755)
    env = {"PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}

    def git_commands(*args):
        calls.unlink(missing_ok=True)
        done = run_memvault("add", *args, env=env)
        assert done.returncode == 0, done.stderr
        return [line.split()[0] for line in calls.read_text().splitlines()]

    plumbing = ["update-index", "rev-parse", "write-tree", "diff-tree", "commit-tree", "update-ref"]
    assert git_commands("the first memory makes the vault") == [
        "version", "version", "init", "add", "commit", *plumbing]
    assert git_commands("the user keeps bees") == ["version", "version", *plumbing]
    assert git(vault_dir, "log", "--format=%s").splitlines() == [
        "memvault add: 1 memory (global)", "memvault add: 1 memory (global)", "memvault init: new vault"]
    assert git(vault_dir, "status", "--porcelain") == ""


def test_a_change_that_changes_nothing_makes_no_commit(vault_dir):
    """Without a `git status` first, the failed commit must be told apart from nothing to commit."""
    vault = Vault(vault_dir, auto_index=False)
    with vault.change("test") as change:
        memory = change.add(files.new_memory("The user keeps bees"))
    head = git(vault_dir, "rev-parse", "HEAD").strip()
    assert change.commit_sha == head
    with vault.change("test") as change:
        change.rewrite(memory)  # the same bytes again
    assert change.commit_sha is None
    assert git(vault_dir, "rev-parse", "HEAD").strip() == head
    assert git(vault_dir, "status", "--porcelain") == ""


def test_git_versioning_off_writes_files_without_commits(vault_dir, monkeypatch):
    monkeypatch.setenv("MEMVAULT_ENABLE_GIT_VERSIONING", "false")
    assert run_cli("add", "plain").exit_code == 0
    assert not (vault_dir / ".git").exists()
    assert [m.text for m in live_memories(vault_dir)] == ["plain"]


def test_entry_point_and_python_m_both_work(vault_dir):
    result = run_memvault("add", "via entry point")
    assert result.returncode == 0, result.stderr
    done = subprocess.run([sys.executable, "-m", "memvault", "add", "via -m"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sorted(m.text for m in live_memories(vault_dir)) == ["via -m", "via entry point"]


def test_a_post_commit_hook_of_the_user_still_runs(vault_dir, tmp_path):
    """Commits are made with git's plumbing, which runs no hook: with a post-commit hook (one that
    pushes, say), memvault commits through `git commit` as before, so that the hook runs."""
    seed("The user keeps bees")
    ran = tmp_path / "hook-ran"
    hook = vault_dir / ".git" / "hooks" / "post-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f'#!/bin/sh\ngit log -1 --format=%s >> "{ran}"\n')
    hook.chmod(0o755)
    assert run_cli("add", "The user rows on Sundays").exit_code == 0
    assert ran.read_text() == "memvault add: 1 memory (global)\n"
    assert git(vault_dir, "status", "--porcelain") == ""


def test_a_long_lived_writer_asks_for_the_hook_path_once_and_sees_hooks_path_set_later(vault_dir, tmp_path,
                                                                                      monkeypatch):
    """serve commits every exchange: where git keeps the post-commit hook is asked once per process
    (issue 41: one git process fewer per commit), and asked again when the vault's config changes (a
    core.hooksPath set meanwhile, with a hook there: it runs)."""
    from memvault.store import gitrepo

    vault = Vault(vault_dir, auto_index=False)
    asked = []
    real_run = gitrepo._run
    monkeypatch.setattr(gitrepo, "_run", lambda root, *args, **kw: asked.append(args[0]) or real_run(root, *args, **kw))
    for text in ("The user keeps bees", "The user rows on Sundays", "The user reads at night"):
        with vault.change("test") as change:
            change.add(files.new_memory(text))
    assert asked.count("rev-parse") == 1 and asked.count("commit-tree") == 3
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    ran = tmp_path / "hook-ran"
    (hooks / "post-commit").write_text(f'#!/bin/sh\ngit log -1 --format=%s >> "{ran}"\n')
    (hooks / "post-commit").chmod(0o755)
    time.sleep(0.01)  # the config's modification time moves on
    git(vault_dir, "config", "core.hooksPath", str(hooks))
    with vault.change("test") as change:
        change.add(files.new_memory("The user swims in the lake"))
    assert ran.read_text() == "memvault test: 1 memory (global)\n"
    assert git(vault_dir, "status", "--porcelain") == ""


def test_a_folder_that_is_a_repository_of_other_files_is_refused_unless_shared(tmp_path, monkeypatch):
    """Issue 44: `--vault` pointed at a project's repository committed memories into it, unsaid."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("print('hello')\n")
    (project / "README.md").write_text("# A project\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the project")
    refused = run_cli("--vault", str(project), "add", "The user keeps bees")
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr == (f"memvault: error: {project} is a git repository that tracks other files (README.md, "
                              "src/app.py): memvault would commit every memory into it; give --vault a folder of its "
                              "own, or set share_repository = true (memvault.toml, or MEMVAULT_SHARE_REPOSITORY=1) to "
                              "keep the vault there; nothing was written\n")
    assert sorted(p.name for p in project.iterdir()) == [".git", "README.md", "src"]
    assert git(project, "log", "--format=%s").splitlines() == ["the project"]
    monkeypatch.setenv("MEMVAULT_SHARE_REPOSITORY", "1")  # asked for: the vault lives in the project
    assert run_cli("--vault", str(project), "add", "The user keeps bees").exit_code == 0
    assert git(project, "log", "-1", "--format=%s").startswith("memvault add")
    monkeypatch.delenv("MEMVAULT_SHARE_REPOSITORY")
    assert run_cli("--vault", str(project), "add", "The user keeps goats").exit_code == 0  # a vault now: entries/


def test_a_created_at_before_the_year_1000_names_its_file_with_four_digits(vault_dir):
    """Issue 44: created_at 0999-06-01 named the file 9990601T..., which sorted after 2026 and read as no time."""
    line = json.dumps({"text": "The abbey was founded", "created_at": "0999-06-01T00:00:00Z"})
    added = run_cli("add", "--jsonl", "-", input=line + "\n")
    assert added.exit_code == 0, added.stderr
    assert added.stdout.split()[1].split("/")[-1].startswith("09990601T000000000000Z__")
    seed("The user keeps bees")
    listed = json.loads(run_cli("ls", "--json").stdout)
    assert [m["text"] for m in listed] == ["The user keeps bees", "The abbey was founded"]  # newest first
    assert listed[1]["created_at"] == "0999-06-01T00:00:00.000000+00:00"
    assert [m["text"] for m in json.loads(run_cli("ls", "--json", "--until", "1500-01-01").stdout)] == \
        ["The abbey was founded"]
