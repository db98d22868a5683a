"""`--as-of` (issue 29): what the vault held at a moment, from the files' own times and tombstones,
no git checkout. A memory created later is absent; one deleted or replaced later is present, as it
was then. Real index, real git, the fake LLM over HTTP for the one learned replacement."""

from __future__ import annotations

import json

import memvault
from conftest import run_cli

FACTS = lambda *texts: json.dumps({"facts": list(texts)})  # noqa: E731
NO = '{"answer": "no"}'


def history(vault_dir, llm_env, monkeypatch):
    """Berlin (January 2025), replaced by Lisbon (June); a cat added in February, deleted in April;
    tennis in August."""
    monkeypatch.setenv("MEMVAULT_ENABLE_SUMMARIZATION", "false")
    vault = memvault.open_vault(vault_dir)
    llm_env.push(FACTS("The user lives in Berlin"))
    vault.add_extracted("I live in Berlin", now="2025-01-10T10:00:00Z")
    [cat] = vault.add("The user has a cat named Miso", created_at="2025-02-01T10:00:00Z")
    vault.remove(cat.id, now=memvault_time("2025-04-01T10:00:00Z"))
    llm_env.push(FACTS("The user lives in Lisbon"), NO)
    llm_env.default = '{"answer": "yes"}'  # any other pair the reconciliation asks about stays
    vault.add_extracted("I moved to Lisbon", now="2025-06-01T10:00:00Z")
    vault.add("The user plays tennis on Saturdays", created_at="2025-08-01T10:00:00Z")
    by_text = {m.text: m for m in vault.recent(limit=50)} | {m.text: m for m in vault.recent(limit=50, deleted=True)}
    return vault, by_text


def memvault_time(text):
    from memvault.store import files

    return files.parse_time(text)


def test_search_as_of_finds_what_was_true_then(vault_dir, llm_env, monkeypatch):
    vault, by_text = history(vault_dir, llm_env, monkeypatch)
    berlin, lisbon = by_text["The user lives in Berlin"], by_text["The user lives in Lisbon"]
    assert berlin.extra["replaced_by"] == lisbon.id  # the replacement really happened

    now = [r.text for r in vault.search("where does the user live", relevance_floor=0).results]
    assert "The user lives in Lisbon" in now and "The user lives in Berlin" not in now
    # March 2025: Berlin (replaced later) is back, Lisbon (learned later) is not.
    then = [r.text for r in vault.search("where does the user live", as_of="2025-03-01", relevance_floor=0).results]
    assert then[0] == "The user lives in Berlin" and "The user lives in Lisbon" not in then
    # The cat, deleted in April, is found in March and not in May; tennis not before August.
    cat_march = vault.search("pet cat", as_of="2025-03-01", relevance_floor=0).results
    assert [r.text for r in cat_march][:1] == ["The user has a cat named Miso"]
    may = [r.text for r in vault.search("pet cat tennis", as_of="2025-05-01", relevance_floor=0).results]
    assert "The user has a cat named Miso" not in may and "The user plays tennis on Saturdays" not in may

    # The face: the prompt block of then says that day, and nothing from after it.
    block = run_cli("search", "--format", "prompt", "--as-of", "2025-03-01", "--relevance-floor", "0",
                    "where does the user live").stdout
    assert "Today is Sat 1 March 2025" in block and "Fri 10 January 2025:\n  [memory] The user lives in Berlin" in block
    assert "Lisbon" not in block
    bad = run_cli("search", "--as-of", "last spring", "where")
    assert bad.exit_code == 2 and "--as-of" in bad.stderr


def test_ls_and_show_as_of_a_replaced_and_a_deleted_memory(vault_dir, llm_env, monkeypatch):
    vault, by_text = history(vault_dir, llm_env, monkeypatch)
    berlin, cat = by_text["The user lives in Berlin"], by_text["The user has a cat named Miso"]

    listed = json.loads(run_cli("ls", "--json", "--as-of", "2025-03-01").stdout)
    assert [m["text"] for m in listed] == ["The user has a cat named Miso", "The user lives in Berlin"]
    assert not any(m["deleted"] for m in listed)  # live then
    assert "replaced_by" not in listed[1]["meta"] and listed[1]["deleted_since"].startswith("2025-06-01")
    later = [m["text"] for m in json.loads(run_cli("ls", "--json", "--as-of", "2025-07-01").stdout)]
    assert later == ["The user lives in Lisbon"]  # the cat deleted in April, Berlin replaced in June
    assert run_cli("ls", "--as-of", "2025-03-01", "--deleted").exit_code == 2

    shown = run_cli("show", "--as-of", "2025-03-01", berlin.id[:8])
    assert shown.exit_code == 0 and "The user lives in Berlin" in shown.stdout
    assert "replaced_by" not in shown.stdout and "deleted since" in shown.stdout
    gone = run_cli("show", "--as-of", "2025-05-01", cat.id[:8])
    assert gone.exit_code == 1 and "was deleted before 2025-05-01" in gone.stderr
    lisbon = by_text["The user lives in Lisbon"]
    early = run_cli("show", "--as-of", "2025-03-01", lisbon.id[:8])
    assert early.exit_code == 1 and "did not exist yet" in early.stderr
    # The API keeps the tombstone's file where it is: only the view is of then.
    assert vault.get(cat.id, as_of="2025-03-01").path == vault.get(cat.id).path


def test_show_as_of_an_edited_memory_gives_its_text_of_then_and_says_it_changed(vault_dir, tmp_path):
    """Issue 44: `show --as-of` of a memory edited since printed today's text, unsaid."""
    vault = memvault.open_vault(vault_dir)
    [lena] = vault.add("# Lena\nLena lives in Porto", created_at="2025-01-10T10:00:00Z")
    edited = vault.edit(lena.id, "# Lena\nLena lives in Lisbon").memory
    shown = run_cli("show", "--as-of", "2025-03-01", lena.id[:8])
    assert shown.exit_code == 0, shown.stderr
    assert "Lena lives in Porto" in shown.stdout and "Lisbon" not in shown.stdout
    assert f"edited since     {edited.extra['updated_at']}: the text below is as it was then" in shown.stdout
    as_json = json.loads(run_cli("show", "--json", "--as-of", "2025-03-01", lena.id[:8]).stdout)
    assert (as_json["text"], as_json["edited_since"], as_json["text_of"]) == \
        ("# Lena\nLena lives in Porto", edited.extra["updated_at"], "then")
    assert "updated_at" not in as_json["meta"]  # the front matter of then
    # Asked of a moment after the edit: today's text, nothing to say.
    today = run_cli("show", "--as-of", edited.extra["updated_at"], lena.id[:8]).stdout
    assert "Lena lives in Lisbon" in today and "edited since" not in today
    # Without the history (the repository moved away), today's text, said as such.
    (vault_dir / ".git").rename(tmp_path / "git-away")
    unknown = run_cli("show", "--as-of", "2025-03-01", lena.id[:8])
    assert "Lena lives in Lisbon" in unknown.stdout
    assert "the text below is today's; the one of then is not in the history" in unknown.stdout


def test_as_of_leaves_out_what_an_import_brought_in_later(vault_dir, tmp_path):
    """Issue 44: a note written an hour ago and imported now was listed as held half an hour ago (its
    created_at, the file's time, is when it was written; the commit that added it, when the vault got it)."""
    import os
    from datetime import timedelta

    from memvault.store import files

    notes = tmp_path / "notes"
    notes.mkdir()
    plan = notes / "plan.md"
    plan.write_text("# Plan\nRepaint the garden fence in spring\n")
    written = files.utcnow() - timedelta(hours=1)
    os.utime(plan, (written.timestamp(), written.timestamp()))
    vault = memvault.open_vault(vault_dir)
    vault.add("The user likes gardening", created_at=files.format_time(written - timedelta(hours=1)))
    vault.import_from("markdown", notes)
    [note] = vault.recent(kinds=["note"])
    assert abs(note.created_at - written) < timedelta(seconds=1)  # when it was written
    between = files.format_time(written + timedelta(minutes=30))

    listed = [m["text"] for m in json.loads(run_cli("ls", "--json", "--as-of", between).stdout)]
    assert listed == ["The user likes gardening"]
    shown = run_cli("show", "--as-of", between, note.id[:8])
    assert shown.exit_code == 1 and f"was not in the vault yet at {between} (imported 20" in shown.stderr
    found = [r.text for r in vault.search("garden fence", as_of=between, relevance_floor=0).results]
    assert found == ["The user likes gardening"]
    # From the import on it is held, with the time it was written; removed later, it still was.
    vault.remove(note.id)
    after = files.format_time(files.utcnow())
    assert len(json.loads(run_cli("ls", "--json", "--as-of", after).stdout)) == 1  # gone now
    imported_at = min(t for t in json.loads(run_cli("log", "--json").stdout) if t["command"] == "import")["date"]
    held = [m["text"] for m in json.loads(run_cli("ls", "--json", "--as-of", imported_at).stdout)]
    assert held[0].startswith("# Plan") and len(held) == 2
