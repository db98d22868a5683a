"""`memvault log`: history parsed back from git, including hand commits."""

import json
import subprocess
from datetime import datetime, timezone

from conftest import git, run_cli, seed
from memvault.store import files
from memvault.store.vault import Vault


def test_log_shows_adds_replacements_and_hand_edits(vault_dir):
    vault = Vault.open(vault_dir)
    with vault.change("add") as change:
        pizza = change.add(files.new_memory("The user loves pizza"))
        anne = change.add(files.new_memory("The user's wife is named Anne"))
    with vault.change("chat") as change:
        hate = change.replace(pizza, "The user hates pizza", reason="contradiction")
    # A hand edit, committed by the user with plain git.
    anne_path = next(m.path for m in vault.iter_memories() if m.id == anne.id)
    anne_path.write_text(anne_path.read_text().replace("Anne", "Anne Smith"))
    git(vault_dir, "commit", "-qam", "fix surname")

    result = run_cli("log", "--json")
    assert result.exit_code == 0, result.stderr
    entries = json.loads(result.stdout)
    assert [e["command"] for e in entries] == ["hand edit", "chat", "add"]
    assert entries[0]["changes"] == [{
        "id": anne.id, "action": "edited", "text": "The user's wife is named Anne Smith",
        "path": anne_path.relative_to(vault_dir).as_posix(), "reason": None, "replaced_by": None, "replaces": None,
        "role": "memory", "kind": "fact", "before": "The user's wife is named Anne",  # an edit: before -> after
    }]
    chat = {c["id"]: c for c in entries[1]["changes"]}
    assert chat[pizza.id]["action"] == "replaced" and chat[pizza.id]["replaced_by"] == hate.id
    assert chat[hate.id]["action"] == "added" and chat[hate.id]["replaces"] == pizza.id
    assert {c["action"] for c in entries[2]["changes"]} == {"added"}

    assert chat[pizza.id]["cause"] == "chat" and chat[pizza.id]["kind"] == "fact"

    text = run_cli("log").stdout
    assert "+ added" in text and f"> replaced {pizza.id[:8]}  fact     The user loves pizza  -> {hate.id[:8]}" in text
    assert "The user's wife is named Anne  -> The user's wife is named Anne Smith" in text


def test_log_names_the_message_that_replaced_a_fact(vault_dir, llm_env):
    llm_env.push("Noted.", '{"facts": ["The user lives in Lisbon"]}', "The user lives in Lisbon.")
    assert run_cli("chat", "I live in Lisbon.").exit_code == 0
    llm_env.push("Porto it is.", '{"facts": ["The user lives in Porto"]}', '{"answer": "no"}', "The user lives in Porto.")
    assert run_cli("chat", "I moved to Porto last week.").exit_code == 0
    [learning, turns] = json.loads(run_cli("log", "--json", "-n", "2").stdout)
    [replaced] = [c for c in learning["changes"] if c["action"] == "replaced"]
    assert replaced["text"] == "The user lives in Lisbon" and replaced["cause"] == 'chat: "I moved to Porto last week."'
    assert {c["kind"] for c in turns["changes"]} == {"turn"} and {c["role"] for c in turns["changes"]} == {"user", "assistant"}
    assert '[chat: "I moved to Porto last week."]' in run_cli("log", "-n", "1").stdout


def test_log_follows_a_merged_branch(vault_dir):
    seed("on main")
    git(vault_dir, "checkout", "-qb", "side")
    seed("made on a branch")
    git(vault_dir, "checkout", "-q", "-")
    seed("later on main")
    git(vault_dir, "merge", "-q", "--no-ff", "side", "-m", "merge side")
    texts = [c["text"] for e in json.loads(run_cli("log", "--json").stdout) for c in e["changes"]]
    assert sorted(texts) == ["later on main", "made on a branch", "on main"]


def test_log_follows_one_memory_through_replacements(vault_dir):
    vault = Vault.open(vault_dir)
    with vault.change("add") as change:
        first = change.add(files.new_memory("The user lives in Berlin"))
        change.add(files.new_memory("unrelated"))
    with vault.change("chat") as change:
        second = change.replace(first, "The user lives in Lisbon")
    with vault.change("chat") as change:
        third = change.replace(next(m for m in vault.iter_memories() if m.id == second.id), "The user lives in Porto")
    for wanted in (first.id[:8], third.id):
        entries = json.loads(run_cli("log", "--json", wanted).stdout)
        ids = [c["id"] for e in entries for c in e["changes"]]
        assert set(ids) == {first.id, second.id, third.id}
        assert "unrelated" not in json.dumps(entries)
    assert run_cli("log", "ffffffff").exit_code == 1
    assert run_cli("log", "ab").exit_code == 2


def test_log_limit_and_since(vault_dir):
    for text in ["one", "two", "three"]:  # three commits
        seed(text)
    assert len(json.loads(run_cli("log", "-n", "2", "--json").stdout)) == 2
    assert json.loads(run_cli("log", "--since", "2999-01-01", "--json").stdout) == []
    # --until (issue 29): the commits up to a moment, an ISO time compared exactly, git's words too.
    every = json.loads(run_cli("log", "--json").stdout)
    oldest = every[-1]["date"]  # commits of one second share a date: those at the oldest's, no later one
    upto = json.loads(run_cli("log", "--until", oldest, "--json").stdout)
    assert every[-1]["commit"] in [e["commit"] for e in upto]
    assert [e["commit"] for e in upto] == [e["commit"] for e in every if e["date"] == oldest]
    assert json.loads(run_cli("log", "--until", "2000-01-01", "--json").stdout) == []
    assert json.loads(run_cli("log", "--until", "1 year ago", "--json").stdout) == []
    assert len(json.loads(run_cli("log", "--until", "now", "--json").stdout)) == len(every)
    bad = run_cli("log", "--until", "garbage")
    assert bad.exit_code == 2 and "--until" in bad.stderr


def test_log_on_missing_vault_is_one_line(vault_dir):
    result = run_cli("log")
    assert result.exit_code == 1 and "no vault at" in result.stderr


def test_log_lists_twenty_changes_of_a_commit_and_says_how_many_more(vault_dir):
    """An import is one commit of thousands of files: `log` reads and lists 20 of them (-v and --json
    all), so that `log -n 20` of a 100,000-memory vault takes a moment, not half an hour."""
    seed(*[f"bulk memory number {n}" for n in range(25)])
    seed("one more")
    text = run_cli("log").stdout
    assert text.count("+ added") == 21
    assert "  … and 5 more (-v or --json lists them all)" in text
    assert run_cli("-v", "log").stdout.count("+ added") == 26
    entries = json.loads(run_cli("log", "--json").stdout)
    assert [e["changes_total"] for e in entries] == [1, 25] and len(entries[1]["changes"]) == 25


def test_log_follows_a_fact_replaced_by_a_new_one_only_its_tombstone_names(vault_dir):
    """Learning's REPLACE: the old fact's tombstone says replaced_by, the new fact says nothing back.
    Following the new one must still find the old one (the tombstones of the same commit are read)."""
    vault = Vault.open(vault_dir)
    with vault.change("add") as change:
        old = change.add(files.new_memory("The user lives in Berlin"))
        change.add(files.new_memory("unrelated"))
    with vault.change("chat") as change:
        new = change.add(files.new_memory("The user moved to Lisbon"))
        change.soft_delete(next(m for m in vault.iter_memories() if m.id == old.id), "contradiction", replaced_by=new)
    entries = json.loads(run_cli("log", "--json", new.id[:8]).stdout)
    assert {c["id"] for e in entries for c in e["changes"]} == {old.id, new.id}
    assert [e["command"] for e in entries] == ["chat", "add"]


def test_log_follows_a_file_named_by_hand_and_an_id_changed_by_hand(vault_dir):
    note = vault_dir / "entries/global/notes/telescope.md"
    seed("The user keeps bees")
    note.parent.mkdir(parents=True)
    note.write_text("---\nid: feedface-0000-4000-8000-000000000001\nrole: note\n"
                    "created_at: 2026-01-01T00:00:00+00:00\n---\nBuy a telescope\n")
    git(vault_dir, "add", "-A")
    git(vault_dir, "commit", "-qm", "a note of mine")
    entries = json.loads(run_cli("log", "--json", "feedface").stdout)
    assert [c["text"] for e in entries for c in e["changes"]] == ["Buy a telescope"]
    bees = next(m for m in Vault.open(vault_dir).iter_memories() if m.text == "The user keeps bees")
    bees.path.write_text(bees.path.read_text().replace(bees.id, "0badc0de-0000-4000-8000-000000000005"))
    git(vault_dir, "commit", "-qam", "new id")
    entries = json.loads(run_cli("log", "--json", "0badc0de").stdout)
    assert [e["subject"] for e in entries] == ["new id"]


def test_an_edit_below_the_first_line_or_of_the_front_matter_shows_what_changed(vault_dir):
    """Issue 44: `~ edited # Lena -> # Lena` looked like no change: the rows showed first lines only."""
    import memvault

    vault = memvault.open_vault(vault_dir)
    [lena] = vault.add("# Lena\nLena lives in Porto\nShe has a cat")
    vault.edit(lena.id, "# Lena\nLena lives in Lisbon\nShe has a cat")
    path = vault.get(lena.id).path
    path.write_text(path.read_text().replace("role: memory", "tags:\n- family\nrole: memory"))
    git(vault_dir, "commit", "-qam", "tag Lena")
    vault.edit(lena.id, "# Lena\nLena lives in Lisbon\nShe has a cat\n" + "and " * 30 + "a dog called Rex")

    text = run_cli("log").stdout
    assert f"~ edited   {lena.id[:8]}  fact     … Lena lives in Porto  -> … Lena lives in Lisbon" in text
    assert f"~ edited   {lena.id[:8]}  fact     # Lena  -> # Lena (front matter: tags)" in text
    assert "~ edited   " + lena.id[:8] + "  fact     … (no line)  -> … and and" in text
    edits = [c for e in json.loads(run_cli("log", "--json").stdout) for c in e["changes"] if c["action"] == "edited"]
    assert [(c["before"], c["text"]) for c in edits][2] == ("… Lena lives in Porto", "… Lena lives in Lisbon")
