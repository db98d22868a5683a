"""Trust (issue #11): what memvault learns, removes and commits is what the user can see and undo.

Each test reproduces a case that was seen before the fix:
  a question created facts that replaced true ones test_a_question_never_creates_or_replaces_a_fact,
                                                 test_a_statement_beside_a_question_is_learned
  commits took every file in the folder ........ test_a_write_commits_only_what_it_wrote,
                                                 test_reindex_commits_accepted_hand_edits_only
  a write during a merge closed it ............. test_a_write_during_a_merge_is_refused
  a detached HEAD lost commits ................. test_a_write_on_a_detached_head_is_refused
  git missing: stored, untracked, then doubled . test_without_git_nothing_is_stored
  reconcile hid an LLM that was down ........... test_reconcile_fails_loudly_when_the_llm_is_down,
                                                 test_reconcile_fails_loudly_on_garbage
  a NUL byte stored an unreadable memory ....... test_nul_bytes_are_refused_at_the_door
  every change undoable ........................ test_undo_takes_back_what_a_chat_learned,
                                                 test_undo_of_an_undo_brings_it_back,
                                                 test_restore_brings_a_replaced_memory_back
  a failed chat left its question in the session test_a_failed_turn_is_kept_unanswered_and_left_out
  eviction removed 2,502 of the user's facts ... test_eviction_never_takes_what_the_user_added,
                                                 test_eviction_is_a_small_batch_and_shown
  changes were silent .......................... test_chat_shows_every_change_it_makes
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import memvault
from conftest import git, run_cli, run_memvault
from fake_llm import refused_url
from memvault.store import files

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
NO = '{"answer": "no"}'


def facts(*texts: str) -> str:
    return json.dumps({"facts": list(texts)})


def committed(vault_dir: Path, rev: str = "HEAD") -> list[str]:
    """The files one commit changed."""
    return git(vault_dir, "show", "--name-only", "--format=", rev).split()


def live_texts(vault_dir: Path, role: str | None = None) -> list[str]:
    vault = memvault.open_vault(vault_dir).vault
    return sorted(m.text for m in vault.iter_memories(roles=(role,) if role else None))


# -- commits -------------------------------------------------------------------------------

def test_a_write_commits_only_what_it_wrote(vault_dir):
    assert run_cli("add", "first memory").exit_code == 0
    (vault_dir / "scratch.txt").write_text("a note to self\n")
    (vault_dir / "memvault.toml").write_text("default_top_k = 4\n")
    broken = vault_dir / "entries" / "global" / "facts" / "broken.md"
    broken.write_text("---\nid: [unclosed\n---\ntext\n")
    git(vault_dir, "add", "scratch.txt")  # something the user staged by hand
    result = run_cli("add", "--json", "second memory")
    assert result.exit_code == 0, result.stderr
    [stored] = json.loads(result.stdout)
    assert committed(vault_dir) == [stored["path"]]
    status = git(vault_dir, "status", "--porcelain")
    assert "A  scratch.txt" in status  # still staged, still the user's
    assert "?? memvault.toml" in status and "?? entries/global/facts/broken.md" in status


def test_reindex_commits_accepted_hand_edits_only(vault_dir):
    assert run_cli("add", "first memory").exit_code == 0
    facts_dir = vault_dir / "entries" / "global" / "facts"
    (facts_dir / "by-hand.md").write_text("A note written by hand\n")  # adopted
    (facts_dir / "no-closing.md").write_text("---\nid: x\nrole: memory\n")  # rejected
    (vault_dir / "scratch.txt").write_text("not a memory\n")
    result = run_cli("reindex")
    assert result.exit_code == 1  # a rejected file is an error the user must see
    assert "no-closing.md" in result.stderr
    assert committed(vault_dir) == ["entries/global/facts/by-hand.md"]
    assert git(vault_dir, "log", "-1", "--format=%s").strip() == "memvault reindex: 1 hand edit"
    status = git(vault_dir, "status", "--porcelain")
    assert "?? entries/global/facts/no-closing.md" in status and "?? scratch.txt" in status


def test_a_write_during_a_merge_is_refused(vault_dir):
    result = run_cli("add", "--json", "The user lives in Lisbon")
    path = vault_dir / json.loads(result.stdout)[0]["path"]
    git(vault_dir, "checkout", "-q", "-b", "other")
    path.write_text(path.read_text().replace("Lisbon", "Porto"))
    git(vault_dir, "commit", "-qam", "other side")
    git(vault_dir, "checkout", "-q", "-")
    path.write_text(path.read_text().replace("Lisbon", "Faro"))
    git(vault_dir, "commit", "-qam", "this side")
    subprocess.run(["git", "-C", str(vault_dir), "merge", "other"], capture_output=True)  # conflicts
    assert (vault_dir / ".git" / "MERGE_HEAD").exists()
    before = sorted(p.name for p in files.walk_entries(vault_dir, include_deleted=True))
    head = git(vault_dir, "rev-parse", "HEAD")
    result = run_cli("add", "written during the merge")
    assert result.exit_code == 1
    assert "merge in progress" in result.stderr and f"`git -C {vault_dir} merge --abort`" in result.stderr
    assert "nothing was written" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in files.walk_entries(vault_dir, include_deleted=True)) == before
    assert git(vault_dir, "rev-parse", "HEAD") == head
    assert "<<<<<<<" in path.read_text()  # the conflict is the user's to resolve, untouched


def test_a_write_on_a_detached_head_is_refused(vault_dir):
    assert run_cli("add", "one").exit_code == 0
    assert run_cli("add", "two").exit_code == 0
    git(vault_dir, "checkout", "-q", "--detach", "HEAD~1")
    result = run_cli("add", "three")
    assert result.exit_code == 1
    assert "detached HEAD" in result.stderr and "git -C" in result.stderr and "switch" in result.stderr
    assert live_texts(vault_dir) == ["one"]


def test_without_git_nothing_is_stored(vault_dir, tmp_path):
    assert run_cli("add", "stored with git").exit_code == 0
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    done = run_memvault("add", "stored without git", env={"PATH": str(empty)})
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "git is not installed" in err and "enable_git_versioning" in err and "Traceback" not in err
    assert live_texts(vault_dir) == ["stored with git"]


# -- the LLM commands fail loudly ------------------------------------------------------------

def _near_duplicates(vault_dir):
    memvault.open_vault(vault_dir).add(["The user lives in Lisbon", "The user lives in Lisbon, Portugal"])


def test_reconcile_fails_loudly_when_the_llm_is_down(vault_dir, monkeypatch):
    _near_duplicates(vault_dir)
    url = refused_url()
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", url)
    head = git(vault_dir, "rev-parse", "HEAD")
    for args in (["reconcile", "--dry-run"], ["reconcile"]):
        result = run_cli(*args)
        assert result.exit_code == 1, result.stdout
        assert url in result.stderr and "Traceback" not in result.stderr
        assert "KEEP" not in result.stdout
    assert git(vault_dir, "rev-parse", "HEAD") == head


def test_reconcile_fails_loudly_on_garbage(vault_dir, llm_env):
    _near_duplicates(vault_dir)
    llm_env.push("no idea", "still no idea")  # invalid, then invalid after the retry
    result = run_cli("reconcile", "--dry-run")
    assert result.exit_code == 1
    assert "no valid answer" in result.stderr and llm_env.base_url in result.stderr


# -- input -----------------------------------------------------------------------------------

def test_nul_bytes_are_refused_at_the_door(vault_dir, tmp_path):
    result = run_cli("add", input=b"abc\x00def\n")
    assert result.exit_code == 2
    assert "NUL byte" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    line = json.dumps({"text": "bad\u0000text"})
    (tmp_path / "in.jsonl").write_text(line + "\n")
    result = run_cli("add", "--jsonl", str(tmp_path / "in.jsonl"))
    assert result.exit_code == 2 and "line 1" in result.stderr and "NUL byte" in result.stderr
    assert not (vault_dir / "entries").exists() or live_texts(vault_dir) == []


# -- learning only from statements ----------------------------------------------------------

def test_a_question_never_creates_or_replaces_a_fact(vault_dir, llm_env):
    llm_env.push("Noted.", facts("The user works as a nurse", "The user works at the city hospital"),
                 "The user is a nurse at the city hospital.")
    assert run_cli("chat", "--now", T0.isoformat(), "I work as a nurse at the city hospital.").exit_code == 0
    llm_env.push('{"title": "Work", "narrative": "The user said they are a nurse."}')  # the episode --clear closes
    assert run_cli("chat", "--clear", "--now", (T0 + timedelta(minutes=1)).isoformat()).exit_code == 0
    before = len(llm_env.requests)
    # What the 1.5B model did before the fix: asked to extract from the question, it invented a job.
    llm_env.push("You are a nurse; you did not say where you live.",
                 facts("The user's job is a software developer"), NO, NO)
    result = run_cli("chat", "--json", "--now", (T0 + timedelta(minutes=5)).isoformat(),
                     "What is my job, and where do I live?")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["learned"] == []
    assert len(llm_env.requests) == before + 1  # the reply, and no extraction from the question
    assert live_texts(vault_dir, "memory") == ["The user works as a nurse", "The user works at the city hospital"]
    assert "software developer" not in run_cli("log").stdout


def test_a_statement_beside_a_question_is_learned(vault_dir, llm_env):
    llm_env.push("Welcome to Berlin!", facts("The user just moved to Berlin"), "The user lives in Berlin.")
    result = run_cli("chat", "--json", "--now", T0.isoformat(), "I just moved to Berlin. Any tips for good cafés?")
    assert result.exit_code == 0, result.stderr
    assert live_texts(vault_dir, "memory") == ["The user just moved to Berlin"]
    extraction = llm_env.requests[1]["messages"][-1]["content"]
    assert "moved to Berlin" in extraction and "cafés" not in extraction  # the question never reaches it


# -- chat ------------------------------------------------------------------------------------

def test_a_failed_turn_is_kept_unanswered_and_left_out(vault_dir, llm_env, monkeypatch):
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", refused_url())
    for attempt in range(2):
        result = run_cli("chat", "--now", (T0 + timedelta(minutes=attempt)).isoformat(), "What did I say about Rex?")
        assert result.exit_code == 1
    turns = list(memvault.open_vault(vault_dir).vault.iter_memories(roles=("user",)))
    assert [t.extra.get("unanswered") for t in turns] == [True, True]  # the user's words are kept
    assert git(vault_dir, "status", "--porcelain") == ""  # and committed
    context = run_cli("chat", "--context", "--json", "--now", (T0 + timedelta(minutes=3)).isoformat())
    data = json.loads(context.stdout)
    assert data["turns"] == [] and [u["text"] for u in data["unanswered"]] == ["What did I say about Rex?"] * 2
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", llm_env.base_url)
    llm_env.push("Hello!")
    result = run_cli("chat", "--now", (T0 + timedelta(minutes=4)).isoformat(), "hello")
    assert result.exit_code == 0, result.stderr
    sent = [m["content"] for m in llm_env.requests[-1]["messages"][1:]]
    assert sent == ["hello"]  # the orphaned questions are not answered again
    assert "What did I say" not in llm_env.requests[-1]["messages"][0]["content"]  # nor injected as memories


def test_chat_shows_every_change_it_makes(vault_dir, llm_env):
    llm_env.push("Noted.", facts("The user lives in Lisbon"), "The user lives in Lisbon.")
    assert run_cli("chat", "--now", T0.isoformat(), "I live in Lisbon.").exit_code == 0
    llm_env.push("Porto it is.", facts("The user lives in Porto"), NO, "The user lives in Porto.")
    result = run_cli("chat", "--now", (T0 + timedelta(minutes=1)).isoformat(), "I moved to Porto.")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("memvault: ")]
    assert any(line.startswith("memvault: ADD") and "The user lives in Porto" in line for line in lines), lines
    assert any(line.startswith("memvault: REPLACE") and "The user lives in Lisbon" in line for line in lines), lines
    llm_env.push("Faro, then.", facts("The user lives in Faro"), NO, "The user lives in Faro.")
    data = json.loads(run_cli("chat", "--json", "--now", (T0 + timedelta(minutes=2)).isoformat(),
                              "I moved to Faro.").stdout)
    events = {(row["event"], row["text"]) for row in data["learned"]}
    assert ("ADD", "The user lives in Faro") in events and ("REPLACE", "The user lives in Porto") in events


def test_quiet_chat_shows_no_changes(vault_dir, llm_env):
    llm_env.push("Noted.", facts("The user lives in Lisbon"), "The user lives in Lisbon.")
    result = run_cli("-q", "chat", "--now", T0.isoformat(), "I live in Lisbon.")
    assert result.exit_code == 0 and result.stderr == "" and result.stdout == "Noted.\n"


# -- eviction --------------------------------------------------------------------------------

def test_eviction_never_takes_what_the_user_added(vault_dir, monkeypatch):
    vault = memvault.open_vault(vault_dir)
    vault.add([f"the user's own fact number {i}" for i in range(30)])
    monkeypatch.setenv("MEMVAULT_MAX_ENTRIES", "5")
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", refused_url())  # the LLM is down
    result = run_cli("add", "--extract", "thanks")  # small talk: no model call at all
    assert result.exit_code == 0, result.stderr
    assert len(live_texts(vault_dir)) == 30
    assert not [m for m in vault.vault.iter_memories(include_deleted=True) if m.is_deleted]
    assert git(vault_dir, "log", "-1", "--format=%s").startswith("memvault add: 30 memories")


def test_eviction_is_a_small_batch_and_shown(vault_dir, llm_env, monkeypatch):
    vault = memvault.open_vault(vault_dir)
    vault.add("a fact the user added")
    with vault.vault.change("test") as change:  # 30 old chat turns, as a year of chatting leaves them
        for i in range(30):
            change.add(files.new_memory(f"old chat turn {i}", "user", created_at=T0 - timedelta(days=30 - i),
                                        extra={files.ORIGIN_KEY: "chat"}))
    monkeypatch.setenv("MEMVAULT_MAX_ENTRIES", "5")
    llm_env.push("Hi.")  # a greeting: no extraction call
    llm_env.default = '{"title": "An old chat", "narrative": "The user chatted."}'  # episodes the silences closed
    result = run_cli("chat", "--now", T0.isoformat(), "hello")
    assert result.exit_code == 0, result.stderr
    evicted = [line for line in result.stderr.splitlines() if line.startswith("memvault: EVICT")]
    assert len(evicted) == 20, result.stderr  # at most a batch per command, each one shown
    assert "old chat turn 0" in evicted[0]
    assert "a fact the user added" in live_texts(vault_dir)
    tombstones = [m for m in vault.vault.iter_memories(include_deleted=True) if m.is_deleted]
    assert len(tombstones) == 20 and {m.extra["deleted_reason"] for m in tombstones} == {"evicted"}
    assert "Memvault-Evicted: " in git(vault_dir, "log", "-4", "--format=%B")  # then up to 3 episode commits
    # Each day's silence ended an episode; one chat writes the 3 oldest, the next chats the rest.
    assert len(list(vault.vault.iter_memories(roles=("episode",)))) == 3


# -- undo and restore ------------------------------------------------------------------------

def test_undo_takes_back_what_a_chat_learned(vault_dir, llm_env):
    llm_env.push("Noted.", facts("The user lives in Lisbon"), "The user lives in Lisbon.")
    assert run_cli("chat", "--now", T0.isoformat(), "I live in Lisbon.").exit_code == 0
    llm_env.push("Porto it is.", facts("The user lives in Porto"), NO, "The user lives in Porto.")
    assert run_cli("chat", "--now", (T0 + timedelta(minutes=1)).isoformat(), "I moved to Porto.").exit_code == 0
    assert live_texts(vault_dir, "memory") == ["The user lives in Porto"]
    result = run_cli("undo")
    assert result.exit_code == 0, result.stderr
    assert "RESTORE" in result.stdout and "The user lives in Lisbon" in result.stdout
    assert "REMOVE" in result.stdout and "The user lives in Porto" in result.stdout
    assert live_texts(vault_dir, "memory") == ["The user lives in Lisbon"]  # what it learned is taken back
    assert "I moved to Porto." in live_texts(vault_dir, "user")  # the conversation itself stays
    found = json.loads(run_cli("search", "--json", "--kind", "fact", "where does the user live").stdout)
    assert [r["text"] for r in found] == ["The user lives in Lisbon"]  # and the index follows
    assert git(vault_dir, "status", "--porcelain") == ""
    # `undo` again goes further back: the exchange, then the first lesson.
    assert run_cli("undo").exit_code == 0
    assert "I moved to Porto." not in live_texts(vault_dir, "user")
    assert run_cli("undo").exit_code == 0
    assert live_texts(vault_dir, "memory") == []


def test_undo_of_an_undo_brings_it_back(vault_dir):
    [memory] = memvault.open_vault(vault_dir).add("The user keeps bees")
    assert run_cli("rm", memory.id).exit_code == 0
    assert run_cli("undo").exit_code == 0
    assert live_texts(vault_dir) == ["The user keeps bees"]
    redo = git(vault_dir, "rev-parse", "HEAD").strip()
    assert run_cli("undo", redo).exit_code == 0
    assert live_texts(vault_dir) == []


def test_undo_refuses_what_is_not_memvault_s_or_changed_since(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [memory] = vault.add("The user keeps bees")
    memory.path.write_text(memory.path.read_text().replace("bees", "wasps"))
    result = run_cli("undo")
    assert result.exit_code == 1
    assert "changed since" in result.stderr and "by hand" in result.stderr and "nothing was written" in result.stderr
    git(vault_dir, "commit", "-qam", "my own edit")
    result = run_cli("undo", "HEAD")
    assert result.exit_code == 2 and "not made by a memvault command" in result.stderr
    result = run_cli("undo", "no-such-commit")
    assert result.exit_code == 1 and "no commit" in result.stderr
    assert live_texts(vault_dir) == ["The user keeps wasps"]


def test_restore_brings_a_replaced_memory_back(vault_dir, llm_env):
    llm_env.push(facts("The user lives in Lisbon"), "The user lives in Lisbon.")
    assert run_cli("add", "--extract", "I live in Lisbon").exit_code == 0
    llm_env.push(facts("The user lives in Porto"), NO, "The user lives in Porto.")
    assert run_cli("add", "--extract", "I moved to Porto").exit_code == 0
    [lisbon] = [m for m in memvault.open_vault(vault_dir).vault.iter_memories(include_deleted=True) if m.is_deleted]
    result = run_cli("restore", lisbon.id[:8])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("RESTORE") and "The user lives in Lisbon" in result.stdout
    back = memvault.open_vault(vault_dir).get(lisbon.id)
    assert not back.is_deleted and "replaced_by" not in back.extra and "restored_at" in back.extra
    assert live_texts(vault_dir, "memory") == ["The user lives in Lisbon", "The user lives in Porto"]
    assert git(vault_dir, "log", "-1", "--format=%s").startswith("memvault restore:")
    assert run_cli("restore", lisbon.id).exit_code == 2  # live already: nothing to do
