"""The vault tells the truth about itself (issue 27): `log`, `stats`, `reindex --check`, notices and
hints that are always right.

Each test reproduces a case of the issue as it was seen before the fix:
  1 log hid a sync's merge and its tombstones ....... test_log_shows_a_sync_merge_and_follows_what_it_resolved
  2 log ID said "purged" after a restore ............ test_log_of_a_restored_memory_says_restored
  3 reindex --check drifted after every undo ........ test_undo_leaves_the_index_in_step,
                                                      test_stats_and_check_agree_on_a_hand_edit
  4 the notice about files without front matter ..... test_reindex_gives_front_matter_to_a_note_a_search_read_first
  5 a copied memory file was half-rejected .......... test_a_copied_memory_file_is_left_out_everywhere_alike
  6 rm then undo reverted an uncommitted hand edit .. test_undo_of_rm_keeps_a_hand_edit_made_before_it
  7 --threshold blamed the relevance floor .......... test_an_empty_search_names_what_left_the_candidates_out
  8 export --all -c was accepted .................... test_export_all_and_a_conversation_is_a_usage_error
  9 hints and checks: the merge hint ................ test_in_progress_hints_run_as_written
    a vault whose .git was deleted .................. test_a_vault_whose_git_was_deleted_is_not_started_again_unsaid
    clone of a repository that is not a vault ....... test_clone_of_a_repository_that_is_not_a_vault_is_refused
    search -c / ls -c of a typo ..................... test_a_conversation_that_is_not_there_is_said_with_the_close_ones
    edit without a terminal ......................... test_edit_without_a_terminal_is_refused_up_front
    every other command a message names, run ........ test_the_hint*_run* and the table HINT_TESTS
                                                      (test_every_hint_that_names_a_command_is_run_by_a_test)
  10 the same edit on both machines ................. test_the_same_edit_on_both_machines_is_no_conflict
     a note changed at its source, imported again ... test_reimporting_a_changed_note_updates_it
     YAML dates of an imported note ................. test_yaml_dates_of_a_note_stay_dates
The session on two machines that ends with log, stats and reindex --check agreeing is test_session.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from datetime import date, datetime

import pytest

import memvault
from conftest import REPO, git, run_cli, run_memvault, seed


def check(*args: str):
    """`reindex --check` (with these global options)."""
    return run_cli(*args, "reindex", "--check")


def in_step(*args: str) -> bool:
    return json.loads(run_cli(*args, "stats", "--json").stdout)["index"]["in_step"]


# -- 3: undo and the index ------------------------------------------------------------------------

def test_undo_leaves_the_index_in_step(vault_dir):
    """An undo puts files back: they are indexed by the undo itself, so `reindex --check` and `stats`
    agree at once (before, the files put back were left to the next search: drift at every undo)."""
    [bees, anne] = seed("The user keeps bees", "Anne is my wife")
    vault = memvault.open_vault(vault_dir)
    vault.edit(anne.id, "Anne is my wife since 2010")
    for step in (["rm", bees.id], ["undo"], ["undo"]):  # rm, its undo; then the edit's undo
        assert run_cli(*step).exit_code == 0
        done = check()
        assert done.exit_code == 0 and done.stdout == "", (step, done.stdout)
        assert in_step()
    assert run_cli("search", "--json", "bees").stdout.count("The user keeps bees") == 1


def test_stats_and_check_agree_on_a_hand_edit(vault_dir):
    """One answer to "is the index in step": stats said "in step" while reindex --check found a file
    changed by hand (stats compared only the number of rows with the number of files)."""
    [bees] = seed("The user keeps bees")
    bees.path.write_text(bees.path.read_text().replace("bees", "wasps"))
    done = check()
    assert done.exit_code == 1 and done.stdout.startswith("changed ")
    assert not in_step()
    shown = run_cli("stats").stdout
    assert "out of step: 1 changed" in shown and "`memvault reindex` brings it in step" in shown
    assert run_cli("reindex").exit_code == 0  # what the hint says to run
    assert check().exit_code == 0 and in_step()


# -- 1 and 2: log ---------------------------------------------------------------------------------

def log(*args: str) -> list[dict]:
    done = run_cli(*args[:2], "log", "--json", *args[2:]) if args[:1] == ("--vault",) else \
        run_cli("log", "--json", *args)
    assert done.exit_code == 0, done.stderr
    return json.loads(done.stdout)


def actions(entries: list[dict], memory_id: str) -> list[str]:
    return [c["action"] for e in entries for c in e["changes"] if c["id"] == memory_id]


def test_log_of_a_restored_memory_says_restored(vault_dir):
    """`log ID` read the restore as a tombstone purged (it merged what git said of the tombstone's
    folder with what it said of the memory's path); the whole log said restored."""
    [bees, _] = seed("The user keeps bees", "Anne is my wife")
    assert run_cli("rm", bees.id).exit_code == 0
    assert run_cli("restore", bees.id[:6]).exit_code == 0
    assert actions(log(bees.id[:6]), bees.id) == ["restored", "deleted", "added"]
    assert actions(log(), bees.id) == ["restored", "deleted", "added"]
    shown = run_cli("log", bees.id[:6]).stdout
    assert "^ restored" in shown and "purged" not in shown


@pytest.fixture
def two_machines(tmp_path, embedder):
    """A vault on machine A with two memories, pushed to a bare remote and cloned on machine B."""
    bare, a, b = tmp_path / "remote.git", tmp_path / "a", tmp_path / "b"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    added = memvault.open_vault(a).add(["The user keeps bees", "Anne is my wife"])
    git(a, "remote", "add", "origin", str(bare))
    memvault.open_vault(a).sync()
    memvault.clone_vault(str(bare), b)
    return a, b, {m.text.split()[0].lower(): m.id for m in added}


def test_log_shows_a_sync_merge_and_follows_what_it_resolved(two_machines):
    """The merge a sync made (its tombstones, its `Memvault-Resolved` lines) was missing from `log`;
    `log ID` of its tombstone found nothing, and `log ID` of a memory deleted on one machine and
    edited on the other left out the deletion and the resolution that brought it back."""
    a, b, ids = two_machines
    bees, anne = ids["the"], ids["anne"]
    memvault.open_vault(a).edit(bees, "The user keeps bees in Porto")
    memvault.open_vault(b).edit(bees, "The user keeps bees in Lisbon")
    memvault.open_vault(b).edit(anne, "Anne is my wife since 2010")
    memvault.open_vault(a).remove([anne])
    memvault.open_vault(a).sync()
    merged = memvault.open_vault(b).sync()  # B merges: both memories in conflict
    memvault.open_vault(a).sync()
    assert {r.id for r in merged.resolved} == {bees, anne}
    tombstones = {r.id: r.sibling.rsplit("__", 1)[1].removesuffix(".md") for r in merged.resolved}
    for machine in (a, b):
        [entry] = [e for e in log("--vault", str(machine), "-n", "50") if e["commit"] == merged.merge_commit]
        assert entry["command"] == "sync"
        by_id = {c["id"]: c for c in entry["changes"]}
        assert by_id[anne]["action"] == "resolved" and by_id[anne]["text"] == "Anne is my wife since 2010"
        assert "deleted on one side, edited on the other" in by_id[anne]["cause"]
        assert by_id[bees]["action"] == "resolved" and "edited on both sides" in by_id[bees]["cause"]
        # the same words on both machines: the commit whose version stands, not "here"
        assert re.search(r": kept the version of [0-9a-f]{8}; the other is the tombstone", by_id[bees]["cause"])
        for kept, tombstone in tombstones.items():
            assert by_id[tombstone]["action"] == "replaced" and by_id[tombstone]["replaced_by"] == kept
            followed = log("--vault", str(machine), tombstone[:8])
            assert merged.merge_commit in [e["commit"] for e in followed]
        story = log("--vault", str(machine), anne[:8])
        told = actions(story, anne)  # the rm and the edit of two machines: in either order (same second)
        assert told[0] == "resolved" and sorted(told[1:3]) == ["deleted", "edited"] and told[3:] == ["added"]


# -- 4: files without front matter -----------------------------------------------------------------

def test_reindex_gives_front_matter_to_a_note_a_search_read_first(vault_dir):
    """The notice said "`memvault reindex` adds their front matter", but reindex then committed the
    file without one (the search had recorded it as read) and said "0 added, 0 changed" while
    committing "1 hand edit"."""
    seed("The user keeps bees")
    note = vault_dir / "entries" / "global" / "notes" / "telescope.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("Buy a telescope\n")
    found = run_cli("search", "telescope")
    assert "Buy a telescope" in found.stdout
    assert "1 file(s) without front matter read as notes; `memvault reindex` adds their front matter" in found.stderr
    done = run_cli("reindex")  # what the notice says to run
    assert done.exit_code == 0, done.stderr
    assert note.read_text().startswith("---\nid: ") and note.read_text().endswith("Buy a telescope\n")
    assert git(vault_dir, "show", "HEAD:entries/global/notes/telescope.md").startswith("---\nid: ")
    assert done.stdout.startswith("0 added, 1 changed") and "committed 1 hand edit" in done.stdout
    assert "adopted entries/global/notes/telescope.md as a note (front matter added)" in done.stderr
    assert git(vault_dir, "status", "--porcelain") == "" and check().exit_code == 0
    again = run_cli("reindex")
    assert again.stdout.startswith("0 added, 0 changed") and "committed" not in again.stdout


# -- 5: a memory file copied by hand ----------------------------------------------------------------

def test_a_copied_memory_file_is_left_out_everywhere_alike(vault_dir):
    """A copy claiming an id another file has: reindex left it out, yet `ls` listed both under one id
    and `stats` counted it, "in step"."""
    [bees, _] = seed("The user keeps bees", "Anne is my wife")
    copy = bees.path.with_name("bees-copy.md")
    copy.write_text(bees.path.read_text().replace("bees", "bees and wasps"))
    done = run_cli("reindex")
    assert done.exit_code == 1
    assert f"bees-copy.md: id {bees.id} is already used by " in done.stderr
    listed = run_cli("ls", "--json")
    assert [m["id"] for m in json.loads(listed.stdout)].count(bees.id) == 1
    assert f"skipped {copy}: id {bees.id} is already used by " in listed.stderr
    stats = json.loads(run_cli("stats", "--json").stdout)
    assert stats["memories"] == 2 and stats["skipped"] == 1
    assert not stats["index"]["in_step"] and stats["index"]["drift"]["skipped"] == 1
    assert "`memvault reindex --check` names the files left out and why" in run_cli("stats").stdout
    assert "bees-copy.md" in check().stderr and check().exit_code == 1  # what stats says to run
    assert json.loads(run_cli("show", "--json", bees.id).stdout)["text"] == "The user keeps bees"
    # What the skip says to do: without its `id:` line the copy is a memory of its own.
    assert "delete its `id:` line and run `memvault reindex`" in done.stderr
    copy.write_text("".join(line for line in copy.read_text().splitlines(True) if not line.startswith("id: ")))
    assert run_cli("reindex").exit_code == 0
    ids = [m["id"] for m in json.loads(run_cli("ls", "--json").stdout)]
    assert len(ids) == len(set(ids)) == 3 and bees.id in ids
    assert in_step() and check().exit_code == 0


# -- 6: a hand edit not committed yet ----------------------------------------------------------------

def test_undo_of_rm_keeps_a_hand_edit_made_before_it(vault_dir, tmp_path, monkeypatch):
    """`rm` of a memory edited by hand (not committed) carried the edit in its tombstone, and `undo`
    put back the text from before the edit without a word. Now the edit is committed first, on its
    own: the rm's commit is only the rm, and its undo takes back only that (the same for `edit`)."""
    [bees, anne] = seed("The user keeps bees", "Anne is my wife")
    monkeypatch.setenv("EDITOR", editor(tmp_path, "and more"))
    for memory, command in ((bees, ["rm", bees.id]), (anne, ["edit", anne.id])):
        memory.path.write_text(memory.path.read_text().replace(memory.text, memory.text + ", by hand"))
        done = run_cli(*command)
        assert done.exit_code == 0, done.stderr
        assert f"committed the hand edit of {memory.path.relative_to(vault_dir)} first" in done.stderr
        assert run_cli("undo").exit_code == 0
        assert memvault.open_vault(vault_dir).get(memory.id).text == memory.text + ", by hand"
        assert check().exit_code == 0 and git(vault_dir, "status", "--porcelain") == ""
    story = actions(log(bees.id[:8]), bees.id)
    assert story == ["restored", "deleted", "edited", "added"]


def editor(tmp_path, text: str) -> str:
    """An $EDITOR that appends `text` to the file it is given."""
    script = tmp_path / "editor.sh"
    script.write_text(f"#!/bin/sh\nprintf '%s' '{text}' >> \"$1\"\n")
    script.chmod(0o755)
    return str(script)


# -- 7: why a search came back empty ----------------------------------------------------------------

def test_an_empty_search_names_what_left_the_candidates_out(vault_dir):
    """`search --threshold 0.9` explained its empty result with the relevance floor, when the
    threshold had dropped a result of 0.53."""
    seed("The user keeps bees in the garden", "Anne is my wife", "The car is blue", "Lisbon is sunny in May")
    done = run_cli("search", "--threshold", "0.9", "bees in the garden")
    assert done.exit_code == 0 and done.stdout == ""
    said = re.search(r"no memory matches well enough \(1 candidate below --threshold 0\.9: the best has "
                     r"relevance (0\.\d{3}); (\d+) below relevance_floor 0\.15: --relevance-floor 0 shows them\)",
                     done.stderr)
    assert said, done.stderr
    best = said.group(1)
    kept = json.loads(run_cli("search", "--json", "--threshold", best, "bees in the garden").stdout)
    assert [r["text"] for r in kept] == ["The user keeps bees in the garden"]
    shown = json.loads(run_cli("search", "--json", "--relevance-floor", "0", "bees in the garden").stdout)
    assert len(shown) == 4  # what the note says --relevance-floor 0 does


# -- 8: contradicting options ---------------------------------------------------------------------

def test_export_all_and_a_conversation_is_a_usage_error(vault_dir):
    """`export --all -c work` exported everything; `search`, `ls` and `reconcile` refuse the same."""
    seed("The user keeps bees")
    done = run_cli("export", "--all", "-c", "work")
    assert done.exit_code == 2 and done.stdout == ""
    assert "--all and -c/--conversation do not go together" in done.stderr


# -- 9: hints and checks ----------------------------------------------------------------------------

def commands_in(message: str) -> list[list[str]]:
    """The commands a message tells the user to run (each `between backticks`), as argv lists."""
    return [shlex.split(command) for command in re.findall(r"`([^`]+)`", message)]


def run_hint(argv: list[str], vault_dir=None, **env: str) -> subprocess.CompletedProcess:
    """A hinted command as the user would type it: git itself, or the memvault entry point."""
    if argv[0] == "memvault":
        return run_memvault(*argv[1:], env=env, text=True)
    return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})


def _conflicting_commits(vault_dir):
    """Two branches that change the same line of a file outside entries/: `main` and `other`."""
    seed("The user keeps bees")
    branch = git(vault_dir, "branch", "--show-current").strip()
    notes = vault_dir / "notes.txt"
    notes.write_text("first\n")
    git(vault_dir, "add", "notes.txt")
    git(vault_dir, "commit", "-qm", "notes")
    git(vault_dir, "checkout", "-qb", "other")
    notes.write_text("other side\n")
    git(vault_dir, "commit", "-qam", "other side")
    git(vault_dir, "checkout", "-q", branch)
    notes.write_text("this side\n")
    git(vault_dir, "commit", "-qam", "this side")
    return branch


IN_PROGRESS = {  # what starts each of git's multi-step operations with a conflict, and its mark
    "merge": (["merge", "other"], "MERGE_HEAD"),
    "rebase": (["rebase", "other"], "rebase-merge"),
    "rebase --apply": (["rebase", "--apply", "other"], "rebase-apply"),
    "cherry-pick": (["cherry-pick", "other"], "CHERRY_PICK_HEAD"),
    "revert": (["revert", "--no-edit", "HEAD"], "REVERT_HEAD"),
    "am": (["am", "other.patch"], "rebase-apply/applying"),
}


@pytest.mark.parametrize("operation", sorted(IN_PROGRESS))
@pytest.mark.parametrize("finish", ["--continue", "--abort"])
def test_in_progress_hints_run_as_written(vault_dir, operation, finish):
    """A write during a merge said ``git -C /vault git merge --continue`` (git twice) and
    ``git merge --abort`` (no -C). Each command the refusal names is run as written, then memvault
    writes again."""
    _conflicting_commits(vault_dir)
    args, mark = IN_PROGRESS[operation]
    if operation == "revert":  # a revert that conflicts: of a commit whose line changed since
        (vault_dir / "notes.txt").write_text("changed again\n")
        git(vault_dir, "commit", "-qam", "changed again")
        args = ["revert", "--no-edit", "HEAD~1"]
    if operation == "am":  # a patch of the other side's commit, applied here
        patch = git(vault_dir, "format-patch", "-1", "other", "--stdout")
        args = ["am", str(vault_dir.parent / "other.patch")]
        (vault_dir.parent / "other.patch").write_text(patch)
    subprocess.run(["git", "-C", str(vault_dir), *args], capture_output=True)
    assert (vault_dir / ".git" / mark).exists()
    refused = run_cli("add", "written meanwhile")
    assert refused.exit_code == 1 and "nothing was written" in refused.stderr
    hinted = [argv for argv in commands_in(refused.stderr) if argv[-1] == finish]
    assert len(hinted) == 1 and hinted[0][:3] == ["git", "-C", str(vault_dir)], refused.stderr
    if finish == "--continue":  # the conflict settled by hand first, as the user would
        (vault_dir / "notes.txt").write_text("settled\n")
        git(vault_dir, "add", "notes.txt")
    done = run_hint(hinted[0], GIT_EDITOR="true")
    assert done.returncode == 0, done.stderr
    assert not (vault_dir / ".git" / mark).exists()
    assert run_cli("add", "written afterwards").exit_code == 0


def test_a_vault_whose_git_was_deleted_is_not_started_again_unsaid(vault_dir):
    """With its .git deleted, the next write made a new repository and left every memory untracked
    until a reindex. Now writes (and `log`) stop and say what to run; run as written, the memories
    are the first commit of a new history."""
    seed("The user keeps bees", "Anne is my wife")
    shutil.rmtree(vault_dir / ".git")
    refused = run_cli("add", "written afterwards")
    assert refused.exit_code == 1 and "has memory files but no git repository" in refused.stderr
    assert "nothing was written" in refused.stderr and not (vault_dir / ".git").exists()
    assert run_cli("log").stderr == refused.stderr.replace("; nothing was written", "")
    hinted = commands_in(refused.stderr)
    assert [argv[:3] for argv in hinted] == [["git", "-C", str(vault_dir)], ["memvault", "--vault", str(vault_dir)],
                                             ["memvault", "clone"]]
    for argv in hinted[:2]:  # start a new history with the files as they are
        done = run_hint(argv)
        assert done.returncode == 0, done.stderr
    assert git(vault_dir, "status", "--porcelain") == ""
    assert sorted(c["text"] for e in log() for c in e["changes"]) == ["Anne is my wife", "The user keeps bees"]
    assert run_cli("add", "written afterwards").exit_code == 0


def test_clone_of_a_repository_that_is_not_a_vault_is_refused(tmp_path, embedder):
    """`clone` of any git repository succeeded with 0 memories, and later writes committed into it."""
    project = tmp_path / "project"
    (project / "ideas").mkdir(parents=True)
    (project / "README.md").write_text("# A project\n")
    (project / "ideas" / "boat.md").write_text("Build a boat someday.\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a project")
    target = tmp_path / "copy"
    refused = run_cli("clone", str(project), str(target))
    assert refused.exit_code == 2 and "is not a memvault vault" in refused.stderr, refused.stderr
    assert "nothing was written" in refused.stderr and not target.exists()
    # What it says to do to bring its notes in: clone it with git, then import the notes.
    [clone, bring_in] = commands_in(refused.stderr)
    checkout = tmp_path / "checkout"
    assert run_hint([checkout if arg == "FOLDER" else arg for arg in clone]).returncode == 0
    done = run_hint([str(checkout) if arg == "FOLDER" else arg for arg in bring_in])
    assert done.returncode == 0, done.stderr
    assert "Build a boat someday." in [m["text"] for m in json.loads(run_cli("ls", "--json").stdout)]
    empty = tmp_path / "empty.git"  # an empty repository is a vault yet to be written
    subprocess.run(["git", "init", "-q", "--bare", str(empty)], check=True)
    assert run_cli("clone", str(empty), str(tmp_path / "fresh")).exit_code == 0


def test_a_conversation_that_is_not_there_is_said_with_the_close_ones(vault_dir):
    """`search -c wrok` and `ls -c wrok` gave no hint of a typo. Their exit code stays 0 (nothing is
    wrong with asking); `export`, which has nothing to write, fails as before, with the hint."""
    seed("Ship on Friday", conversation="work")
    seed("The user keeps bees")
    for command in (["search", "-c", "wrok", "ship"], ["ls", "-c", "wrok"]):
        done = run_cli(*command)
        assert done.exit_code == 0, done.stderr
        assert "memvault: no conversation 'wrok' in the vault (did you mean work?)" in done.stderr, command
    exported = run_cli("export", "-c", "wrok")
    assert exported.exit_code == 1 and f"no conversation 'wrok' in {vault_dir} (did you mean work?)" in exported.stderr
    assert "no conversation" not in run_cli("ls", "-c", "work").stderr + run_cli("search", "bees").stderr
    far = run_cli("ls", "-c", "zzzz")
    assert "memvault: no conversation 'zzzz' in the vault; `memvault conversations` lists them" in far.stderr
    listed = run_hint(commands_in(far.stderr)[0])
    assert listed.returncode == 0 and "work" in listed.stdout and "global" in listed.stdout


def test_edit_without_a_terminal_is_refused_up_front(vault_dir, tmp_path, monkeypatch):
    """Without a terminal and without $VISUAL or $EDITOR, `memvault edit` opened vi, which failed."""
    [bees] = seed("The user keeps bees")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    refused = run_cli("edit", bees.id)  # the test runner is no terminal
    assert refused.exit_code == 2 and "needs a terminal" in refused.stderr, refused.stderr
    assert git(vault_dir, "log", "-1", "--format=%s").startswith("memvault add")
    [hinted] = commands_in(refused.stderr)
    assert hinted[0].startswith("EDITOR=") and hinted[1:] == ["memvault", "edit", bees.id[:8]]
    done = run_hint(hinted[1:], EDITOR=editor(tmp_path, "in the garden"))  # an editor that needs no terminal
    assert done.returncode == 0, done.stderr
    assert memvault.open_vault(vault_dir).get(bees.id).text == "The user keeps bees\nin the garden"


# -- 10: sync and import details ---------------------------------------------------------------------

def test_the_same_edit_on_both_machines_is_no_conflict(two_machines):
    """The same edit made on both machines (the same text; only `updated_at` differs) was settled as
    a conflict: a tombstone with identical text beside the memory."""
    a, b, ids = two_machines
    for machine in (a, b):
        memvault.open_vault(machine).edit(ids["the"], "The user keeps bees in Porto")
    memvault.open_vault(a).sync()
    result = memvault.open_vault(b).sync()
    memvault.open_vault(a).sync()
    [resolved] = result.resolved
    assert resolved.case == "the same edit on both sides" and resolved.sibling is None
    for machine in (a, b):
        assert json.loads(run_cli("--vault", str(machine), "ls", "--deleted", "--json").stdout) == []
        assert memvault.open_vault(machine).get(ids["the"]).text == "The user keeps bees in Porto"
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")


def test_reimporting_a_changed_note_updates_it(vault_dir, tmp_path):
    """Importing a folder of notes again said "nothing new" and kept the old text of a note that had
    changed, unsaid. Now a note changed at its source is updated (an edit, in the import's commit,
    that log shows and undo takes back), unless it was changed in the vault too: then the vault's
    version is kept, and said."""
    notes = tmp_path / "Notes"
    notes.mkdir()
    (notes / "boat.md").write_text("# Boat\n\nBuild a boat someday.\n")
    (notes / "garden.md").write_text("# Garden\n\nPlant leeks.\n")
    assert run_cli("import", "markdown", str(notes)).exit_code == 0
    by_title = {m["meta"]["title"]: m for m in json.loads(run_cli("ls", "--json").stdout)}
    (notes / "boat.md").write_text("# Boat\n\nBuild a boat this summer.\n")
    (notes / "garden.md").write_text("# Garden\n\nPlant leeks and beans.\n")
    memvault.open_vault(vault_dir).edit(by_title["Garden"]["id"], "# Garden\n\nPlant leeks and onions.")
    again = run_cli("import", "markdown", str(notes))
    assert again.exit_code == 0, again.stderr
    assert "updated 1 note changed at its source" in again.stdout and "nothing new" not in again.stdout
    assert "kept entries/" in again.stderr and "garden.md changed since it was imported, here too" in again.stderr
    vault = memvault.open_vault(vault_dir)
    assert vault.get(by_title["Boat"]["id"]).text == "# Boat\n\nBuild a boat this summer."
    assert vault.get(by_title["Garden"]["id"]).text == "# Garden\n\nPlant leeks and onions."
    [entry] = log("-n", "1")
    assert entry["command"] == "import" and actions([entry], by_title["Boat"]["id"]) == ["edited"]
    third = run_cli("import", "markdown", str(notes))  # nothing changed since: nothing to say
    assert "nothing new" in third.stdout and third.stderr.count("kept ") == 1


def test_yaml_dates_of_a_note_stay_dates(vault_dir, tmp_path):
    """A note's `created: 2024-03-01` came back as the string '2024-03-01' (quoted in the vault's file,
    a text property to Obsidian). What memvault does now: in the files, a note's dates stay YAML dates
    as the note wrote them; in the library, `date` and `datetime` values; in every JSON (show, ls,
    search, export, the API), ISO 8601 strings; and export -> import jsonl gives the same file."""
    notes = tmp_path / "Notes"
    notes.mkdir()
    (notes / "trip.md").write_text("---\ncreated: 2024-03-01\nreviewed: 2024-03-05 10:30:00\n"
                                   "visits: [2023-06-01, 2023-07-01]\nstatus: draft\n---\n# Trip\n\nPlan the trip.\n")
    assert run_cli("import", "markdown", str(notes)).exit_code == 0
    [note] = json.loads(run_cli("ls", "--json").stdout)
    written = (vault_dir / note["path"]).read_text()
    assert "\ncreated: 2024-03-01\n" in written and "\nreviewed: 2024-03-05 10:30:00\n" in written
    assert "\n- 2023-06-01\n" in written or "[2023-06-01, 2023-07-01]" in written
    memory = memvault.open_vault(vault_dir).get(note["id"])
    assert memory.extra["created"] == date(2024, 3, 1) and memory.extra["reviewed"] == datetime(2024, 3, 5, 10, 30)
    shown = json.loads(run_cli("show", "--json", note["id"]).stdout)["meta"]
    assert (shown["created"], shown["reviewed"], shown["visits"]) == ("2024-03-01", "2024-03-05T10:30:00",
                                                                      ["2023-06-01", "2023-07-01"])
    assert note["meta"]["created"] == "2024-03-01"
    exported = tmp_path / "all.jsonl"
    assert run_cli("export", "--all", "-o", str(exported)).exit_code == 0
    other = tmp_path / "other"
    assert run_cli("--vault", str(other), "import", "jsonl", str(exported)).exit_code == 0
    assert (other / note["path"]).read_bytes() == (vault_dir / note["path"]).read_bytes()


# -- 9: every other hint that names a command, run as written ---------------------------------------

def test_the_hint_of_a_missing_vault_runs(vault_dir):
    refused = run_cli("search", "bees")
    assert refused.exit_code == 1 and "no vault at" in refused.stderr
    [hinted] = commands_in(refused.stderr)
    assert hinted == ["memvault", "add"]
    assert run_hint([*hinted, "The user keeps bees"]).returncode == 0
    assert "The user keeps bees" in run_cli("search", "bees").stdout


def test_the_hint_of_an_unreadable_index_runs(vault_dir):
    seed("The user keeps bees", "Anne is my wife")
    for data in (vault_dir / ".memvault" / "index").rglob("data/*.lance"):
        data.unlink()  # the table's rows gone from under it
    broken = run_cli("search", "bees")
    assert broken.exit_code == 1 and "the index under .memvault/ is unreadable" in broken.stderr, broken.stderr
    [hinted] = commands_in(broken.stderr)
    assert run_hint(hinted).returncode == 0
    assert "The user keeps bees" in run_cli("search", "bees").stdout and check().exit_code == 0


def test_an_unreadable_index_reads_the_same_in_every_face(vault_dir):
    """LanceDB's failure is translated once (errors.as_memvault_error): the CLI, serve (a 503, not a
    500) and an MCP tool give the same words and the same hint."""
    from memvault.errors import IndexUnreadable, as_memvault_error
    from memvault.faces.mcp_server import _failure
    from memvault.faces.http import as_api_error

    seed("The user keeps bees")
    for data in (vault_dir / ".memvault" / "index").rglob("data/*.lance"):
        data.unlink()
    vault = memvault.open_vault(vault_dir)
    try:
        with pytest.raises(Exception) as raised:
            vault.search("bees")
    finally:
        vault.close()
    failure = as_memvault_error(raised.value)
    assert isinstance(failure, IndexUnreadable) and "`memvault reindex` repairs it" in str(failure)
    answered = as_api_error(raised.value)
    assert (answered.status, answered.message) == (503, str(failure))
    assert str(_failure(raised.value)) == str(failure)
    assert run_cli("search", "bees").stderr == f"memvault: error: {failure}\n"


@pytest.mark.parametrize("which", ["switch <branch>", "switch -c <new-branch>"])
def test_the_hints_of_a_detached_head_run(vault_dir, which):
    seed("one")
    seed("two")
    branch = git(vault_dir, "branch", "--show-current").strip()
    git(vault_dir, "checkout", "-q", "--detach", "HEAD~1")
    refused = run_cli("add", "three")
    assert refused.exit_code == 1 and "detached HEAD" in refused.stderr
    [hinted] = [argv for argv in commands_in(refused.stderr) if " ".join(argv[3:]) == which]
    names = {"<branch>": branch, "<new-branch>": "kept"}
    assert run_hint([names.get(arg, arg) for arg in hinted]).returncode == 0
    assert run_cli("add", "three").exit_code == 0


@pytest.mark.slow  # end to end: three refused edits through $EDITOR, each hint then run as a command (~22 s here)
def test_the_hints_of_a_rejected_edit_run(vault_dir, tmp_path, monkeypatch):
    """`edit` refuses a copy that lost its text, changed its role or its conversation, naming the
    command that does what was meant: each is run."""
    [bees] = seed("The user keeps bees")
    script = tmp_path / "rewrite.py"
    for change, wanted in (("text", ["memvault", "rm"]), ("role", ["memvault", "add", "--kind"]),
                           ("conversation", ["memvault", "add", "-c"])):
        script.write_text("import re, sys\npath = sys.argv[1]\ntext = open(path).read()\n"
                          + {"text": "text = text.split('---\\n', 2)\ntext = '---\\n' + text[1] + '---\\n'\n",
                             "role": "text = text.replace('role: memory', 'role: note')\n",
                             "conversation": "text = text.replace('conversation_id: global', 'conversation_id: work')\n"}
                          [change] + "open(path, 'w').write(text)\n")
        monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
        refused = run_cli("edit", bees.id)
        assert refused.exit_code == 1, refused.stderr
        [hinted] = commands_in(refused.stderr)[:1]
        assert hinted == wanted, refused.stderr
        argument = {"text": [bees.id], "role": ["note", "The user keeps bees"],
                    "conversation": ["work", "The user keeps bees"]}[change]
        if change != "text":
            done = run_hint([*hinted, *argument])
            assert done.returncode == 0, done.stderr
    assert run_hint(["memvault", "rm", bees.id]).returncode == 0  # what the empty text's refusal names
    kinds = {(m["kind"], m["conversation_id"]) for m in json.loads(run_cli("ls", "--json").stdout)}
    assert kinds == {("note", "global"), ("fact", "work")}


def test_the_hint_of_undo_of_a_hand_commit_runs(vault_dir):
    [bees] = seed("The user keeps bees")
    bees.path.write_text(bees.path.read_text().replace("bees", "wasps"))
    git(vault_dir, "commit", "-qam", "my own edit")
    refused = run_cli("undo", "HEAD")
    assert refused.exit_code == 2 and "not made by a memvault command" in refused.stderr
    [hinted] = commands_in(refused.stderr)
    assert run_hint(hinted, GIT_EDITOR="true").returncode == 0
    assert bees.path.read_text().endswith("The user keeps bees\n")


def test_the_hints_of_sync_run(two_machines, tmp_path):
    """No remote: the `git remote add` it names; a settings file changed on both machines: the merge
    by hand it names; a file changed by hand that the remote changed too: the commit it names. Each
    run as written, then `memvault sync` finishes."""
    a, b, _ = two_machines
    alone = tmp_path / "alone"
    memvault.open_vault(alone).add("The user keeps hens")
    refused = run_cli("--vault", str(alone), "sync")
    assert refused.exit_code == 1
    [add_remote] = commands_in(refused.stderr)
    bare = tmp_path / "alone.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    assert run_hint([str(bare) if arg == "URL" else arg for arg in add_remote]).returncode == 0
    assert run_cli("--vault", str(alone), "sync").exit_code == 0 and git(bare, "log", "--oneline")

    for machine, value in ((a, 7), (b, 9)):
        (machine / "memvault.toml").write_text(f"default_top_k = {value}\n")
        git(machine, "add", "memvault.toml")
        git(machine, "commit", "-qm", "settings")
    assert run_cli("--vault", str(a), "sync").exit_code == 0
    refused = run_cli("--vault", str(b), "sync")
    assert refused.exit_code == 1 and "merge it by hand" in refused.stderr
    [merge_by_hand] = commands_in(refused.stderr)
    run_hint(merge_by_hand, GIT_EDITOR="true")  # stops at the conflict, for the user to settle
    (b / "memvault.toml").write_text("default_top_k = 8\n")
    git(b, "commit", "-qam", "settled by hand")
    assert run_cli("--vault", str(b), "sync").exit_code == 0
    assert run_cli("--vault", str(a), "sync").exit_code == 0

    lines = ["one", "two", "three", "four", "five"]
    (a / "notes.txt").write_text("\n".join(lines) + "\n")
    git(a, "add", "notes.txt")
    git(a, "commit", "-qm", "notes")
    assert run_cli("--vault", str(a), "sync").exit_code == 0 and run_cli("--vault", str(b), "sync").exit_code == 0
    (a / "notes.txt").write_text("\n".join(["ONE", *lines[1:]]) + "\n")
    git(a, "commit", "-qam", "notes on A")
    assert run_cli("--vault", str(a), "sync").exit_code == 0
    (b / "notes.txt").write_text("\n".join([*lines[:-1], "FIVE"]) + "\n")  # not committed
    refused = run_cli("--vault", str(b), "sync")
    assert refused.exit_code == 1 and "has changes that are not committed" in refused.stderr
    [commit_it] = commands_in(refused.stderr)
    assert run_hint(commit_it).returncode == 0
    assert run_cli("--vault", str(b), "sync").exit_code == 0
    assert (b / "notes.txt").read_text() == "\n".join(["ONE", *lines[1:-1], "FIVE"]) + "\n"


# Every command memvault's messages tell the user to run ((module, command as written), f-string
# parts as {}), and the test that runs it as written. A new hint without a test fails here.
HINT_TESTS = {
    # issue 33 (the agent)
    ("faces/agent.py", "memvault agent status"): "test_agent.py::test_the_socket_is_owner_only_and_one_agent_per_vault",
    ("faces/warm.py", "memvault log"):
        "test_agent.py::test_an_agent_killed_mid_command_is_reported_and_nothing_is_half_written",
    # issue 31 (secrets)
    ("faces/cli.py", "memvault scrub --rewrite-history"):
        "test_secrets.py::test_a_hand_commit_with_a_key_is_not_pushed_until_scrubbed_and_the_override_pushes_it",
    ("changing/scrub.py", "memvault scrub --rewrite-history"):
        "test_secrets.py::test_a_hand_commit_with_a_key_is_not_pushed_until_scrubbed_and_the_override_pushes_it",
    ("changing/scrub.py", "memvault sync --push-secrets"):
        "test_secrets.py::test_a_hand_commit_with_a_key_is_not_pushed_until_scrubbed_and_the_override_pushes_it",
    ("store/reindex.py", "memvault reindex"): "test_truth.py::test_reindex_gives_front_matter_to_a_note_a_search_read_first",
    ("reading/browse.py", "memvault conversations"): "test_truth.py::test_a_conversation_that_is_not_there_is_said_with_the_close_ones",
    ("faces/cli.py", "memvault reindex"): "test_truth.py::test_stats_and_check_agree_on_a_hand_edit",
    ("faces/cli.py", "memvault reindex --check"): "test_truth.py::test_a_copied_memory_file_is_left_out_everywhere_alike",
    ("faces/cli.py", "EDITOR='code -w' memvault edit {}"): "test_truth.py::test_edit_without_a_terminal_is_refused_up_front",
    ("store/gitrepo.py", "git -C {} switch -c <new-branch>"): "test_truth.py::test_the_hints_of_a_detached_head_run",
    ("store/gitrepo.py", "git -C {} switch <branch>"): "test_truth.py::test_the_hints_of_a_detached_head_run",
    ("store/gitrepo.py", "git -C {} {} --abort"): "test_truth.py::test_in_progress_hints_run_as_written",
    ("store/gitrepo.py", "git -C {} {} --continue"): "test_truth.py::test_in_progress_hints_run_as_written",
    ("moving/import_formats.py", "memvault import chatgpt {}"):
        "test_import_export.py::test_claude_export_given_as_chatgpt_and_back_says_which",
    ("moving/import_formats.py", "memvault import claude {}"):
        "test_import_export.py::test_claude_export_given_as_chatgpt_and_back_says_which",
    ("store/index.py", "memvault reindex"): "test_truth.py::test_a_copied_memory_file_is_left_out_everywhere_alike",
    ("changing/manage.py", "memvault add --kind"): "test_truth.py::test_the_hints_of_a_rejected_edit_run",
    ("changing/manage.py", "memvault add -c"): "test_truth.py::test_the_hints_of_a_rejected_edit_run",
    ("changing/manage.py", "memvault rm"): "test_truth.py::test_the_hints_of_a_rejected_edit_run",
    ("faces/mcp_server.py", "memvault reindex --check"): "test_mcp.py::test_vault_stats_says_what_reindex_check_says",
    ("moving/merge.py", "git -C {} commit -m 'changed by hand' {}"): "test_truth.py::test_the_hints_of_sync_run",
    ("moving/merge.py", "git -C {} merge {}"): "test_truth.py::test_the_hints_of_sync_run",
    ("moving/merge.py", "memvault sync"): "test_truth.py::test_the_hints_of_sync_run",
    ("store/models.py", "memvault models --download"): "test_everyday.py::test_a_failed_download_exits_1",
    ("moving/sync.py", "git -C {} remote add origin URL"): "test_truth.py::test_the_hints_of_sync_run",
    ("moving/sync.py", "git -C {} switch <branch>"): "test_truth.py::test_the_hints_of_a_detached_head_run",
    ("moving/sync.py", "git clone {} FOLDER"): "test_truth.py::test_clone_of_a_repository_that_is_not_a_vault_is_refused",
    ("moving/sync.py", "memvault import markdown FOLDER"):
        "test_truth.py::test_clone_of_a_repository_that_is_not_a_vault_is_refused",
    ("moving/sync.py", "memvault sync"):
        "test_sync.py::test_a_push_rejected_because_the_remote_moved_is_one_line_and_a_second_sync_finishes",
    ("changing/undo.py", "git -C {} revert {}"): "test_truth.py::test_the_hint_of_undo_of_a_hand_commit_runs",
    ("errors.py", "memvault reindex"): "test_truth.py::test_the_hint_of_an_unreadable_index_runs",
    ("faces/term.py", "memvault review"): "test_learning_trust.py::test_a_learned_fact_never_retires_a_fact_the_user_added",
    ("faces/cli.py", "memvault review"):
        "test_learning_trust.py::test_with_learned_review_every_learned_fact_waits_until_kept",
    ("faces/mcp_server.py", "memvault review"):
        "test_learning_trust.py::test_with_learned_review_every_learned_fact_waits_until_kept",
    ("learning/learn.py", "memvault learn"): "test_learning_trust.py::test_a_chat_whose_upkeep_failed_is_caught_up_by_learn",
    ("learning/chat.py", "memvault learn"): "test_learning_trust.py::test_a_chat_whose_upkeep_failed_is_caught_up_by_learn",
    ("learning/learn.py", "memvault summarize --rebuild"): "test_chat.py::test_summarize_rebuild_depth_by_size",
    ("changing/review.py", "memvault rm"):
        "test_learning_trust.py::test_review_rejects_a_fact_and_what_it_replaced_comes_back",
    ("store/vault.py", "git -C {} init"): "test_truth.py::test_a_vault_whose_git_was_deleted_is_not_started_again_unsaid",
    ("store/vault.py", "memvault --vault {} reindex"):
        "test_truth.py::test_a_vault_whose_git_was_deleted_is_not_started_again_unsaid",
    ("store/vault.py", "memvault add"): "test_truth.py::test_the_hint_of_a_missing_vault_runs",
    ("store/vault.py", "memvault clone"): "test_sync.py::test_clone_builds_the_index_and_refuses_a_folder_in_use",
    ("store/vault.py", "memvault undo"): "test_truth.py::test_undo_of_rm_keeps_a_hand_edit_made_before_it",
    # issue 44
    ("changing/manage.py", "memvault log {}"):
        "test_show_edit_rm.py::test_show_of_a_memory_an_undo_took_out_says_so_and_which_commit",
    ("reading/retrieval.py", "memvault reindex"):
        "test_reindex.py::test_a_damaged_full_text_index_is_found_said_searched_around_and_rebuilt",
}
_HINT = re.compile(r"`((?:memvault|git|EDITOR=(?:'[^']*'|\S+) memvault) [^`]*)`|\brun (memvault [a-z]+(?: --?[a-z-]+)*)")


def hints_in_source() -> set[tuple[str, str]]:
    """(module, command) for each command named in a string of memvault's code (docstrings left out)."""
    import ast

    import typer.main

    from memvault.faces.cli import app

    commands = set(typer.main.get_command(app).commands)
    found = set()
    for path in sorted((REPO / "memvault").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
            else:
                continue
            for match in _HINT.finditer(text):
                if match.group(2) and match.group(2).split()[1] not in commands:
                    continue  # "run memvault again"
                found.add((path.relative_to(REPO / "memvault").as_posix(), match.group(1) or match.group(2)))
    return found


def test_every_hint_that_names_a_command_is_run_by_a_test():
    """A message that tells the user to run something is only right if that runs: each such command
    in memvault's code has a test that runs it as written (the table above)."""
    found = hints_in_source()
    assert sorted(found - set(HINT_TESTS)) == [], "hints without a test that runs them"
    assert sorted(set(HINT_TESTS) - found) == [], "hints no longer in the code"
    for where in set(HINT_TESTS.values()):
        module, name = where.split("::")
        assert f"\ndef {name}(" in (REPO / "tests" / module).read_text(encoding="utf-8"), where
