"""`Memvault.recent` (the newest live memories, found by file name) and a removal's reason
(`remove(..., reason=)`, kept as `deleted_note`): the library operations under the MCP tools
recent_memories and delete_memory (and, later, `memvault ls`)."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone

import pytest

import memvault
from conftest import git, run_cli
from memvault.store import files

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def texts(memories) -> list[str]:
    return [m.text for m in memories]


def test_recent_lists_the_newest_live_memories_newest_first(vault_dir):
    vault = memvault.open_vault(vault_dir)
    for day, (text, conversation, kind) in enumerate([
            ("The user keeps bees", "global", "fact"), ("Standup moved to 9:15", "work", "fact"),
            ("Chose Postgres for billing", "work", "decision"), ("Read about error budgets", "work", "note"),
            ("The user moved to Lisbon", "global", "fact")]):
        vault.add(text, conversation=conversation, kind=kind, created_at=T0 + timedelta(days=day))
    assert texts(vault.recent()) == ["The user moved to Lisbon", "Read about error budgets",
                                     "Chose Postgres for billing", "Standup moved to 9:15", "The user keeps bees"]
    assert texts(vault.recent(limit=2)) == ["The user moved to Lisbon", "Read about error budgets"]
    assert texts(vault.recent("work")) == ["Read about error budgets", "Chose Postgres for billing",
                                           "Standup moved to 9:15"]
    assert texts(vault.recent(kinds=["fact"], limit=2)) == ["The user moved to Lisbon", "Standup moved to 9:15"]
    assert texts(vault.recent("work", kinds=["decision", "note"])) == ["Read about error budgets",
                                                                       "Chose Postgres for billing"]
    assert vault.recent("nobody") == []
    # A removed memory is no longer listed.
    lisbon = vault.recent(limit=1)[0]
    vault.remove(lisbon.id)
    assert texts(vault.recent(limit=1)) == ["Read about error budgets"]


def test_recent_reads_only_the_files_it_returns(vault_dir, monkeypatch):
    vault = memvault.open_vault(vault_dir)
    vault.add([f"Memory number {n}" for n in range(30)])
    read = []
    real = files.read_memory_raw  # what every read of a file goes through
    monkeypatch.setattr(files, "read_memory_raw", lambda path, root=None: read.append(path) or real(path, root))
    assert len(vault.recent(limit=3)) == 3
    assert len(read) == 4  # and one more: whether there is a page after this one


def test_recent_orders_hand_dropped_files_and_edited_times_by_their_time(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [old] = vault.add("An old fact", created_at=T0)
    vault.add("A newer fact", created_at=T0 + timedelta(days=10))
    # A file dropped in by hand has no time in its name (nor front matter): its mtime is its time.
    dropped = vault_dir / "entries" / "global" / "notes" / "groceries.md"
    dropped.parent.mkdir(parents=True)
    dropped.write_text("Buy leeks and honey\n")
    stamp = (T0 + timedelta(days=5)).timestamp()
    os.utime(dropped, (stamp, stamp))
    assert texts(vault.recent()) == ["A newer fact", "Buy leeks and honey", "An old fact"]
    # Chat turns are listed when their kind is asked for (or no kind is); summaries never are.
    turn = files.new_memory("hello there", "user", created_at=T0 + timedelta(days=20))
    summary = files.new_memory("The user keeps bees.", "summary", created_at=T0 + timedelta(days=30),
                               extra={"summary_kind": "rolling"})
    vault.add_memories([turn, summary])
    assert texts(vault.recent(limit=2)) == ["hello there", "A newer fact"]
    assert texts(vault.recent(kinds=["turn"])) == ["hello there"]
    assert texts(vault.recent(kinds=["fact", "note"], limit=1)) == ["A newer fact"]
    # An unreadable file is passed over with a notice; the rest are listed.
    notices = []
    broken = vault_dir / "entries" / "global" / "facts" / "20991231T000000000000Z__broken.md"
    broken.write_text("---\nid: [unclosed\n---\ntext\n")
    noisy = memvault.open_vault(vault_dir, notice=notices.append)
    assert texts(noisy.recent(limit=2)) == ["hello there", "A newer fact"]
    assert any("broken.md" in n and "not valid YAML" in n for n in notices)
    assert old.id in [m.id for m in noisy.recent(limit=10)]


def test_recent_refuses_a_bad_limit_conversation_or_kind(vault_dir):
    vault = memvault.open_vault(vault_dir)
    vault.add("The user keeps bees")
    with pytest.raises(memvault.UsageError, match="limit"):
        vault.recent(limit=0)
    with pytest.raises(memvault.UsageError, match="path component"):
        vault.recent("../../etc")
    with pytest.raises(memvault.UsageError, match="unknown kind"):
        vault.recent(kinds=["memo"])


def test_recent_pages_exactly_through_memories_created_at_one_moment(vault_dir):
    """Paging is the library's: created_at then id, both descending, so 65 memories of one moment (a
    bulk import) in two conversations page exactly, each once, in the order one long listing gives;
    a cursor no listing gave is refused in the library's words, naming `cursor`."""
    vault = memvault.open_vault(vault_dir)
    vault.add([f"Imported line {n}" for n in range(40)], conversation="import-a", created_at=T0)
    vault.add([f"Imported line {n}" for n in range(40, 65)], conversation="import-b", created_at=T0)
    vault.add("Written after the import", created_at=T0 + timedelta(seconds=1))
    vault.add("Written before the import", created_at=T0 - timedelta(seconds=1))
    whole = vault.recent(limit=1000)
    assert len(whole) == 67 and whole.next_cursor is None
    assert [(m.created_at, m.id) for m in whole] == sorted(((m.created_at, m.id) for m in whole), reverse=True)
    for size in (1, 7, 66):
        seen, cursor = [], None
        while True:
            page = vault.recent(limit=size, cursor=cursor)
            assert 0 < len(page) <= size
            seen += [m.id for m in page]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == [m.id for m in whole], size
    # The filters go with the cursor: a conversation's memories page by themselves.
    first = vault.recent("import-b", limit=20)
    rest = vault.recent("import-b", limit=20, cursor=first.next_cursor)
    assert len(first) == 20 and len(rest) == 5 and rest.next_cursor is None
    assert [m.id for m in first + rest] == [m.id for m in whole if m.conversation_id == "import-b"]
    for bad in ("yesterday", "", first.next_cursor[:-3], "MjAyNnxhYmM"):  # the last: "2026|abc"
        with pytest.raises(memvault.UsageError, match="^cursor .* is not one a listing gave") as refused:
            vault.recent(cursor=bad)
        assert refused.value.params == ("cursor",)
    # `memvault ls`: its output as it was; the next page's cursor on stderr, for --cursor.
    shown = run_cli("--vault", str(vault_dir), "ls", "-n", "3")
    assert shown.exit_code == 0 and len(shown.stdout.splitlines()) == 3
    [cursor] = re.findall(r"more: --cursor (\S+)", shown.stderr)
    after = run_cli("--vault", str(vault_dir), "--json", "ls", "-n", "3", "--cursor", cursor)
    assert [m["id"] for m in json.loads(after.stdout)] == [m.id for m in whole[3:6]]
    refused = run_cli("--vault", str(vault_dir), "ls", "--cursor", "nonsense")
    assert refused.exit_code == 2 and "--cursor 'nonsense' is not one a listing gave" in refused.stderr


def test_remove_keeps_the_users_reason_in_the_tombstone_and_the_log(vault_dir):
    vault = memvault.open_vault(vault_dir)
    [bees] = vault.add("The user keeps bees")
    [removed] = vault.remove(bees.id[:8], reason="  sold the hives  ")
    tomb = vault.get(bees.id)
    assert tomb.is_deleted and tomb.extra["deleted_reason"] == "user"
    assert tomb.extra["deleted_note"] == "sold the hives" == removed.extra["deleted_note"]
    assert "deleted_note: sold the hives" in tomb.path.read_text()
    change = vault.log(limit=1)[0].to_json()["changes"][0]
    assert change["action"] == "deleted" and change["note"] == "sold the hives"
    # The CLI's log --json shows it too; changes without a reason have no "note" key.
    cli_log = json.loads(run_cli("log", "--json").stdout)
    assert cli_log[0]["changes"][0]["note"] == "sold the hives" and "note" not in cli_log[1]["changes"][0]
    assert git(vault_dir, "status", "--porcelain") == ""
    # No reason: no deleted_note; a reason that could not be stored as text: nothing removed.
    [goats] = vault.add("The user keeps goats")
    with pytest.raises(memvault.UsageError, match="NUL"):
        vault.remove(goats.id, reason="bad\x00reason")
    assert not vault.get(goats.id).is_deleted
    vault.remove([goats.id])
    assert "deleted_note" not in vault.get(goats.id).extra


def test_a_file_edited_in_place_is_read_again_even_with_its_size_and_time_kept(vault_dir):
    """A long-lived process keeps what it parsed of a memory file (a chat reads its session on every
    message), and reads the file again after any write: here a hand edit that keeps the size and
    sets the modification time back, which only the change time tells."""
    vault = memvault.open_vault(vault_dir)
    [memory] = vault.add("The user keeps bees", created_at=T0)
    assert texts(vault.recent()) == ["The user keeps bees"]
    path = memory.path
    before = path.stat()
    path.write_text(path.read_text().replace("keeps bees", "keeps cats"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert texts(vault.recent()) == ["The user keeps cats"]
    first, second = vault.recent()[0], vault.recent()[0]
    first.extra["tags"] = ["changed by the caller"]
    assert second.tags == [] and vault.recent()[0].tags == []  # each call has its own copy
