"""`memvault show`, `edit` and `rm`: one memory at a time, by id or unique prefix.

`edit` is tested with real editor processes: small scripts set as $EDITOR/$VISUAL.
"""

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from conftest import git, run_cli, run_memvault
from memvault.store import files
from memvault.changing import manage
from memvault.store.config import default_vault_path
from memvault.store.vault import Vault


@pytest.fixture(autouse=True)
def loud_again():
    """`-q` sets a process-wide flag (memvault.faces.term); later tests in this process start loud."""
    yield
    from memvault.faces import term

    term.configure(quiet=False)


def add(*args: str) -> dict:
    result = run_cli("add", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)[0]


def editor_script(tmp_path: Path, body: str, name: str = "editor.py") -> Path:
    """An executable Python script; sys.argv[-1] is the file to edit."""
    script = tmp_path / name
    script.write_text(f"#!{sys.executable}\nimport sys\npath = sys.argv[-1]\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


REPLACE = """
old, new = sys.argv[-3], sys.argv[-2]
text = open(path, encoding="utf-8").read()
open(path, "w", encoding="utf-8").write(text.replace(old, new))
"""


def head(vault: Path) -> str:
    return git(vault, "rev-parse", "HEAD").strip()


# -- show ---------------------------------------------------------------------------------------

def test_show_prints_front_matter_then_body(vault_dir):
    memory = add("-t", "family", "--source", "chat", "My wife is Anne")
    result = run_cli("show", memory["id"][:6])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    keys = [line.split()[0] for line in lines[:lines.index("")]]
    assert keys == ["id", "role", "conversation_id", "created_at", "tags", "source", "path"]
    assert f"id               {memory['id']}" in result.stdout
    assert "tags             family" in result.stdout
    assert lines[-1] == "My wife is Anne" and lines[-2] == ""
    assert "\x1b[" not in result.stdout and result.stderr == ""


def test_show_json_and_global_json(vault_dir):
    memory = add("note text")
    for argv in (["show", "--json", memory["id"]], ["--json", "show", memory["id"][:8]]):
        result = run_cli(*argv)
        data = json.loads(result.stdout)
        assert data["id"] == memory["id"] and data["text"] == "note text" and data["deleted"] is False
        assert data["path"] == memory["path"]


def test_show_raw_prints_the_file_bytes(vault_dir):
    memory = add("raw text")
    path = vault_dir / memory["path"]
    path.write_bytes(path.read_bytes().replace(b"raw text", b"raw text \xe2\x98\x95\n\n  trailing  "))
    result = run_memvault("show", "--raw", memory["id"][:5])
    assert result.returncode == 0, result.stderr
    assert result.stdout == path.read_bytes()
    both = run_cli("show", "--raw", "--json", memory["id"])
    assert both.exit_code == 2 and "--raw and --json" in both.stderr


def test_prefixes_like_git(vault_dir):
    first = add("one")
    second = add("two")
    assert run_cli("show", first["id"][:4]).exit_code in (0, 2)  # 4 characters may already be unique
    short = run_cli("show", "abc")
    assert short.exit_code == 2 and "too short (at least 4 characters)" in short.stderr
    missing = run_cli("show", "ffffffff-0000")
    assert missing.exit_code == 1 and missing.stderr.count("\n") == 1 and "no memory with id" in missing.stderr
    # An ambiguous prefix: make two ids share one by renaming the second file's id.
    path = vault_dir / second["path"]
    shared = first["id"][:6] + second["id"][6:]
    path.write_text(path.read_text().replace(second["id"], shared))
    ambiguous = run_cli("show", first["id"][:6])
    assert ambiguous.exit_code == 2 and "ambiguous" in ambiguous.stderr


def test_show_of_a_memory_an_undo_took_out_says_so_and_which_commit(vault_dir):
    """Issue 44: after `undo` of an add, `show ID` said only "no memory with id"."""
    added = add("Lena lives in Porto")
    add_commit = head(vault_dir)
    assert run_cli("undo").exit_code == 0
    undo_commit = head(vault_dir)
    for wanted in (added["id"], added["id"][:8]):
        shown = run_cli("show", wanted)
        assert shown.exit_code == 1
        assert shown.stderr == (f"memvault: error: no memory with id {wanted!r} in {vault_dir}: it was taken out by "
                                f"an undo, commit {undo_commit[:8]}, which took back {add_commit[:8]}; "
                                f"`memvault log {wanted}` shows its history\n")
        told = run_cli("log", wanted)  # the hint, run as written
        assert told.exit_code == 0 and f"! removed  {added['id'][:8]}" in told.stdout and "+ added" in told.stdout
    never = run_cli("show", "ffffffff")
    assert never.stderr == f"memvault: error: no memory with id 'ffffffff' in {vault_dir}\n"


def test_show_without_a_vault(tmp_path):
    result = run_cli("--vault", str(tmp_path / "none"), "show", "abcd")
    assert result.exit_code == 1 and "no vault at" in result.stderr
    assert not (tmp_path / "none").exists()


# -- rm -----------------------------------------------------------------------------------------

def test_rm_soft_deletes_commits_and_prints_what_went(vault_dir):
    keep = add("keep me")
    gone = add("forget me")
    result = run_cli("rm", gone["id"][:8])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"removed {gone['id']}  [memory] forget me\n"
    assert not (vault_dir / gone["path"]).exists()
    tombstone = vault_dir / files.deleted_path_for(vault_dir, vault_dir / gone["path"]).relative_to(vault_dir)
    memory, _ = files.read_memory(tombstone, vault_dir)
    assert memory.extra["deleted_reason"] == "user" and "deleted_at" in memory.extra
    assert git(vault_dir, "status", "--porcelain") == ""
    assert git(vault_dir, "log", "-1", "--format=%s").strip() == "memvault rm: 1 deleted (global)"
    log = json.loads(run_cli("log", "--json", "-n", "1").stdout)
    assert log[0]["changes"][0]["action"] == "deleted" and log[0]["changes"][0]["reason"] == "user"
    # search no longer finds it; show still does, as deleted
    found = json.loads(run_cli("search", "--json", "--no-rerank", "forget me").stdout)
    assert [r["id"] for r in found] == [keep["id"]]
    shown = json.loads(run_cli("show", "--json", gone["id"]).stdout)
    assert shown["deleted"] is True and shown["meta"]["deleted_reason"] == "user"
    again = run_cli("rm", gone["id"])
    assert again.exit_code == 1 and "is deleted (user)" in again.stderr


def test_rm_many_in_one_commit_and_a_bad_id_removes_nothing(vault_dir):
    a, b = add("a"), add("b")
    before = head(vault_dir)
    bad = run_cli("rm", a["id"], "0000dead")
    assert bad.exit_code == 1 and "0000dead" in bad.stderr
    assert head(vault_dir) == before and (vault_dir / a["path"]).exists()
    result = run_cli("--json", "rm", a["id"][:6], b["id"][:6], a["id"])
    assert result.exit_code == 0, result.stderr
    assert sorted(m["id"] for m in json.loads(result.stdout)) == sorted([a["id"], b["id"]])
    assert git(vault_dir, "rev-list", "--count", f"{before}..HEAD").strip() == "1"


def test_remove_library_function(vault_dir):
    memory = add("library rm")
    vault = Vault.open(vault_dir)
    removed = manage.remove(vault, [memory["id"][:7]])
    assert removed[0].id == memory["id"] and removed[0].is_deleted


# -- edit ---------------------------------------------------------------------------------------

def test_edit_rewrites_reindexes_and_commits(vault_dir, tmp_path, monkeypatch):
    memory = add("My wife is Anne")
    script = editor_script(tmp_path, REPLACE)
    monkeypatch.setenv("EDITOR", f"{script} Anne Anna")
    before = head(vault_dir)
    result = run_cli("edit", memory["id"][:8])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{memory['id']}  {memory['path']}\n"
    edited, _ = files.read_memory(vault_dir / memory["path"], vault_dir)
    assert edited.text == "My wife is Anna" and edited.id == memory["id"] and "updated_at" in edited.extra
    assert git(vault_dir, "rev-parse", "HEAD^").strip() == before
    assert git(vault_dir, "log", "-1", "--format=%s").strip() == "memvault edit: 1 edited (global)"
    assert f"Memvault-Edited: {memory['id']}" in git(vault_dir, "log", "-1", "--format=%b")
    assert git(vault_dir, "status", "--porcelain") == ""
    log = json.loads(run_cli("log", "--json", "-n", "1").stdout)
    assert log[0]["changes"][0]["action"] == "edited"
    found = json.loads(run_cli("search", "--json", "--no-rerank", "Anna").stdout)
    assert found[0]["text"] == "My wife is Anna"  # the index has the new text
    assert not list((vault_dir / ".memvault" / "edit").iterdir())  # the working copy is gone


def test_visual_wins_and_editor_values_are_split_like_a_shell(vault_dir, tmp_path, monkeypatch):
    memory = add("colour is blue")
    folder = tmp_path / "my editors"
    folder.mkdir()
    script = editor_script(folder, "assert sys.argv[1] == '-w', sys.argv\n" + REPLACE, name="code")
    monkeypatch.setenv("VISUAL", f"'{script}' -w blue green")
    monkeypatch.setenv("EDITOR", "false")
    result = run_cli("--json", "edit", memory["id"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["text"] == "colour is green" and data["changed"] is True
    assert manage.editor_command({"EDITOR": "code -w"}) == ["code", "-w"]
    assert manage.editor_command({"VISUAL": "", "EDITOR": ""}) == ["vi"]
    assert manage.editor_command({}) == ["vi"]


def test_unchanged_edit_makes_no_commit(vault_dir, tmp_path, monkeypatch):
    memory = add("stays")
    monkeypatch.setenv("EDITOR", str(editor_script(tmp_path, "pass")))
    before = head(vault_dir)
    result = run_cli("edit", memory["id"])
    assert result.exit_code == 0 and result.stdout == ""
    assert "unchanged" in result.stderr
    assert head(vault_dir) == before
    assert run_cli("-q", "edit", memory["id"]).stderr == ""


@pytest.mark.parametrize("body, reason", [
    ("open(path, 'w').write('---\\nid: [unclosed\\n---\\ntext\\n')", "front matter is not valid YAML"),
    ("open(path, 'w').write('no front matter at all\\n')", "the front matter is gone"),
    ("t = open(path).read(); open(path, 'w').write(t.replace('role: memory', 'role: note'))", "the role changed"),
    ("t = open(path).read(); open(path, 'w').write(t.split('---')[0] + '---' + t.split('---')[1] + '---\\n')",
     "the memory text is empty"),
    ("import re; t = open(path).read(); open(path, 'w').write(re.sub(r'id: \\S+', 'id: 1234', t, count=1))",
     "the id changed"),
])
def test_broken_edit_is_one_line_exit_1_and_changes_nothing(vault_dir, tmp_path, monkeypatch, body, reason):
    memory = add("precious words")
    path = vault_dir / memory["path"]
    original = path.read_bytes()
    monkeypatch.setenv("EDITOR", str(editor_script(tmp_path, body)))
    before = head(vault_dir)
    result = run_cli("edit", memory["id"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("memvault: error: ")
    assert memory["path"] in result.stderr and reason in result.stderr
    assert path.read_bytes() == original  # the memory is untouched...
    assert head(vault_dir) == before and git(vault_dir, "status", "--porcelain") == ""  # ...and nothing committed
    [saved] = (vault_dir / ".memvault" / "rejected").glob(f"*__{path.name}")
    assert str(saved) in result.stderr and saved.is_file()  # the user's text is kept, outside git
    assert git(vault_dir, "show", f"HEAD:{memory['path']}").encode() == original  # and git has the old version


def test_failing_editor_and_missing_editor(vault_dir, tmp_path, monkeypatch):
    memory = add("some text")
    monkeypatch.setenv("EDITOR", str(editor_script(tmp_path, "sys.exit(3)")))
    result = run_cli("edit", memory["id"])
    assert result.exit_code == 1 and "exited with status 3; the memory is unchanged" in result.stderr
    changed_then_failed = editor_script(tmp_path, "open(path, 'a').write('more')\nsys.exit(1)", name="e2.py")
    monkeypatch.setenv("EDITOR", str(changed_then_failed))
    result = run_cli("edit", memory["id"])
    assert result.exit_code == 1 and "edit rejected: editor" in result.stderr
    monkeypatch.setenv("EDITOR", "/nonexistent/editor --wait")
    result = run_cli("edit", memory["id"])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "editor '/nonexistent/editor' not found" in result.stderr
    assert files.read_memory(vault_dir / memory["path"], vault_dir)[0].text == "some text"


def test_edit_of_a_deleted_memory_is_refused(vault_dir, tmp_path, monkeypatch):
    memory = add("old")
    assert run_cli("rm", memory["id"]).exit_code == 0
    monkeypatch.setenv("EDITOR", str(editor_script(tmp_path, REPLACE)))
    result = run_cli("edit", memory["id"])
    assert result.exit_code == 1 and "is deleted" in result.stderr


def test_edit_library_retry_reopens_the_editor_on_the_broken_text(vault_dir, tmp_path):
    memory = add("first version")
    calls = tmp_path / "calls"
    # First run breaks the front matter; the second run (on the broken text) repairs it and edits.
    script = editor_script(tmp_path, f"""
import pathlib
calls = pathlib.Path({str(calls)!r})
n = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(n + 1))
text = open(path).read()
if n == 0:
    open(path, 'w').write(text.replace('role: memory', 'role: [broken'))
else:
    assert 'role: [broken' in text
    open(path, 'w').write(text.replace('role: [broken', 'role: memory').replace('first', 'second'))
""")
    asked = []
    result = manage.edit(Vault.open(vault_dir), memory["id"], editor=[str(script)],
                         retry=lambda reason: asked.append(reason) or True)
    assert result.changed and result.memory.text == "second version"
    assert len(asked) == 1 and "not valid YAML" in asked[0]
    assert calls.read_text() == "2"


def test_edit_refuses_when_the_file_changed_meanwhile(vault_dir, tmp_path):
    memory = add("racy")
    path = vault_dir / memory["path"]
    script = editor_script(tmp_path, f"""
p = {str(path)!r}
theirs = open(p).read().replace('racy', 'changed by someone else')
open(p, 'w').write(theirs)
mine = open(path).read().replace('racy', 'mine')
open(path, 'w').write(mine)
""")
    with pytest.raises(manage.EditRejected) as caught:
        manage.edit(Vault.open(vault_dir), memory["id"], editor=[str(script)])
    assert "changed on disk while it was being edited" in str(caught.value)
    assert "changed by someone else" in path.read_text()
    assert "mine" in caught.value.saved.read_text()


def test_default_vault_is_used_without_memvault_dir(tmp_path, monkeypatch):
    # No MEMVAULT_DIR: the XDG default (conftest points XDG_DATA_HOME into tmp_path).
    assert run_cli("add", "in the default vault").exit_code == 0
    memory = next(Vault.open(default_vault_path()).iter_memories())
    assert run_cli("show", memory.id[:8]).stdout.endswith("in the default vault\n")
    assert os.environ.get("MEMVAULT_DIR") is None


def test_an_id_is_found_reading_only_its_file_and_hand_made_files_still_are(vault_dir, monkeypatch):
    import memvault

    vault = memvault.open_vault(vault_dir)
    memories = vault.add([f"memory number {n}" for n in range(20)])
    read = []
    real = files.read_memory
    monkeypatch.setattr(files, "read_memory", lambda path, root=None: read.append(path) or real(path, root))
    assert vault.get(memories[3].id[:8]).text == "memory number 3"
    assert read == [memories[3].path]  # not the 19 others: the index knows their ids
    # A file dropped in by hand: its id is in its front matter only.
    dropped = vault_dir / "entries" / "global" / "notes" / "mine.md"
    dropped.parent.mkdir(parents=True)
    dropped.write_text("---\nid: feedface-0000-4000-8000-000000000001\nrole: note\n"
                       "created_at: 2026-01-01T00:00:00+00:00\n---\nA note of mine\n")
    assert vault.get("feedface").text == "A note of mine"
    # A front matter id changed by hand (the name still carries the old one): found by its new id.
    path = memories[5].path
    path.write_text(path.read_text().replace(memories[5].id, "0badc0de-0000-4000-8000-000000000005"))
    assert vault.get("0badc0de").text == "memory number 5"
    with pytest.raises(memvault.NotFound):
        vault.get(memories[5].id)
    # A tombstone, once a sync has seen it, is found the same way: only its file is read; the two hand
    # edits above, which that sync read as they are (uncommitted: git names them), are not read again
    # (under load the sync came more than a second after them and vouched for them: they were).
    vault.remove(memories[7].id)
    time.sleep(1.2)  # past index.RACY_NS: the sync records the hand edits' stat, as on a loaded machine
    vault.search("memory")
    read.clear()
    gone = vault.get(memories[7].id[:8])
    assert gone.is_deleted and read == [gone.path]


def test_a_read_of_many_lookups_asks_git_once_and_a_write_within_it_is_seen(vault_dir, monkeypatch):
    """Review looks up what each proposal would replace, one memory's page its links and the ids of its story;
    each lookup asked git which files changed since the index (a `git status` of 10,000 files: ~26 ms of CPU),
    so the review page of issue 43 ran one per proposal. Now one read asks once (Index.one_status). A file this
    process writes within the read (a chat turn, written before the model answers: no commit) is still found."""
    import memvault
    from memvault.changing import review
    from memvault.reading import details
    from memvault.store import gitrepo

    library = memvault.open_vault(vault_dir)
    mine = library.add([f"The user's fact number {n}" for n in range(4)])
    for n, old in enumerate(mine):
        library.add(f"The user changed fact {n}", meta={files.ORIGIN_KEY: "learned", "would_replace": [old.id]})
    library.edit(mine[0].id, "The user's fact number 0, edited")
    time.sleep(1.2)  # past index.RACY_NS: the next sync vouches for the files and syncs its record to HEAD
    library.review()  # as every read does first: the index in step, its record synced to HEAD
    vault = Vault.open(vault_dir)
    assert vault.index.changed_paths() is not None  # git's word is had: lookups go by the record
    asked = []
    real = gitrepo.changes_since
    monkeypatch.setattr(gitrepo, "changes_since", lambda *args, **kw: asked.append(args) or real(*args, **kw))
    items = review.waiting(vault)
    assert sorted(m.text for item in items for m in item.would_replace) == \
        ["The user's fact number 0, edited"] + [f"The user's fact number {n}" for n in (1, 2, 3)]
    assert len(asked) == 1  # was 4: one per proposal
    asked.clear()
    found = details.details(vault, mine[0].id)
    assert len(found.proposed) == 1 and len(found.history) == 2 and len(asked) == 1  # was 2
    asked.clear()
    with vault.index.one_status():
        assert vault.find(mine[1].id).text == "The user's fact number 1"
        turn = vault.write_aside("chat", files.new_memory("A turn written within the read", "user"))
        assert vault.find(turn.id).text == "A turn written within the read"
    assert len(asked) == 2
