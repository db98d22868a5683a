"""`memvault reindex`: sync by hashes, hand edits committed, broken files reported, --check, --watch."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import git, memvault_command, run_cli, run_memvault, seed, start_memvault, stop_process, wait_for_line


def add(*texts):
    """The texts as memories; their paths relative to the vault."""
    return [m.path.relative_to(os.environ["MEMVAULT_DIR"]).as_posix() for m in seed(*texts)]


def top(query):
    result = run_cli("search", "--json", "-k", "1", query)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    return data[0]["text"] if data else None


def test_noop_reindex_reports_unchanged(vault_dir):
    add("one fact", "two facts")
    result = run_cli("reindex")
    assert result.exit_code == 0
    assert result.stdout.strip() == "0 added, 0 changed, 0 removed, 2 unchanged, 0 skipped"
    assert len(git(vault_dir, "log", "--format=%s").splitlines()) == 2  # init + add: nothing to commit


def test_check_exits_1_after_hand_edit_and_0_after_reindex(vault_dir):
    rel = add("The user lives in Berlin", "The user has a cat")[0]
    assert run_cli("reindex", "--check").exit_code == 0
    path = vault_dir / rel
    path.write_text(path.read_text().replace("Berlin", "Lisbon"))
    state_before = (vault_dir / ".memvault/state.db").read_bytes()
    check = run_cli("reindex", "--check")
    assert check.exit_code == 1 and check.stdout.strip() == f"changed  {rel}"
    assert (vault_dir / ".memvault/state.db").read_bytes() == state_before  # --check wrote nothing
    result = run_cli("reindex")
    assert result.exit_code == 0 and result.stdout.startswith("0 added, 1 changed")
    assert run_cli("reindex", "--check").exit_code == 0
    log = git(vault_dir, "log", "-1", "--format=%s%n%b")
    assert log.startswith("memvault reindex: 1 hand edit")
    memory_id = rel.split("__")[1][:-3]
    assert f"Memvault-Edited: {memory_id}" in log
    assert git(vault_dir, "status", "--porcelain") == ""
    assert top("Where does the user live?") == "The user lives in Lisbon"


def test_a_save_landing_while_reindex_reads_the_file_is_indexed_next_time(vault_dir, monkeypatch):
    """reindex hashes the bytes it parsed, in one read: when it read the file twice, an editor's
    save in between left the index vouching for the new file while holding the old text, and
    search kept showing the old text until the file changed again."""
    from memvault.store import files

    path = vault_dir / add("The user lives in Berlin")[0]
    path.write_text(path.read_text().replace("Berlin", "Paris"))
    parse = files.parse_memory

    def editor_saves_meanwhile(text, *args, **kwargs):
        parsed = parse(text, *args, **kwargs)
        if "Paris" in text:
            path.write_text(text.replace("Paris", "Lisbon, by the river"))
        return parsed

    monkeypatch.setattr(files, "parse_memory", editor_saves_meanwhile)
    assert run_cli("reindex").exit_code == 0
    monkeypatch.setattr(files, "parse_memory", parse)
    assert run_cli("reindex", "--check").exit_code == 1  # the file on disk is not what is indexed
    result = run_cli("reindex")
    assert result.exit_code == 0 and result.stdout.startswith("0 added, 1 changed")
    assert top("Where does the user live?") == "The user lives in Lisbon, by the river"
    assert git(vault_dir, "status", "--porcelain") == ""


def test_hand_deleted_and_hand_added_files(vault_dir):
    rel = add("The user hates mornings", "The user loves night walks")[0]
    (vault_dir / rel).unlink()
    note = vault_dir / "entries/global/notes/idea.md"
    note.parent.mkdir(parents=True)
    note.write_text("Buy a telescope for the night walks\n")
    result = run_cli("reindex")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("1 added, 0 changed, 1 removed, 1 unchanged, 0 skipped; committed 2 hand edits (")
    assert "adopted entries/global/notes/idea.md as a note" in result.stderr
    assert note.read_text().startswith("---\nid: ") and "role: note" in note.read_text()
    assert git(vault_dir, "status", "--porcelain") == ""
    assert "2 hand edits" in git(vault_dir, "log", "-1", "--format=%s")
    trailers = git(vault_dir, "log", "-1", "--format=%(trailers:only,unfold)")  # each as what it was
    assert "Memvault-Added: " in trailers and "Memvault-Removed: " in trailers and "Edited" not in trailers
    assert top("telescope") == "Buy a telescope for the night walks"


@pytest.mark.parametrize("content, reason", [
    ("---\nid: [oops\n---\nbroken\n", "front matter is not valid YAML"),
    (b"\xff\xfe not utf8", "not UTF-8"),
    ("", "empty file"),
])
def test_broken_file_is_named_skipped_and_the_rest_syncs(vault_dir, content, reason):
    add("The user collects stamps")
    bad = vault_dir / "entries/global/facts/bad.md"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    (vault_dir / "entries/global/facts/good.md").write_text(
        "---\nid: 11111111-2222-3333-4444-555555555555\nrole: memory\ncreated_at: 2025-01-01T00:00:00Z\n---\n"
        "The user collects coins too\n")
    result = run_cli("reindex")
    assert result.exit_code == 1
    assert f"memvault: error: skipped {bad}: {reason}" in result.stderr
    assert "Traceback" not in result.stderr
    assert "1 added, 0 changed, 0 removed, 1 unchanged, 1 skipped" in result.stdout
    assert top("coins") == "The user collects coins too"
    assert bad.exists()  # never deleted, only reported
    # search reports it too, and still answers
    found = run_cli("search", "stamps")
    assert found.exit_code == 0 and "skipped" in found.stderr and "stamps" in found.stdout


def test_two_files_claiming_one_id(vault_dir):
    rel = add("The user owns a kayak")[0]
    copy = vault_dir / rel.replace(".md", "-copy.md")
    shutil.copy(vault_dir / rel, copy)
    copy.write_text(copy.read_text().replace("kayak", "canoe"))
    result = run_cli("reindex")
    assert result.exit_code == 1
    assert f"{copy}: id " in result.stderr and f"is already used by {rel}" in result.stderr
    assert top("boat") == "The user owns a kayak"


def test_index_built_with_another_model_is_rebuilt(vault_dir):
    add("The user speaks Portuguese")
    state_path = vault_dir / ".memvault/state.db"
    with sqlite3.connect(state_path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'model'",
                   (json.dumps({"name": "some/other-model", "dim": 768, "fingerprint": "x"}),))
    result = run_cli("search", "language")
    assert "index was built with some/other-model; rebuilding" in result.stderr
    assert "Portuguese" in result.stdout
    with sqlite3.connect(state_path) as db:
        model = json.loads(db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()[0])
    assert model["name"] == "memvault/all-MiniLM-L6-v2-int8"


def test_switching_to_a_model_that_is_not_downloaded_is_one_clear_line(vault_dir, monkeypatch):
    add("The user speaks Portuguese")
    monkeypatch.setenv("MEMVAULT_EMBEDDING_MODEL", "BAAI/bge-small-en-v1.5")
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(vault_dir.parent / "empty-cache"))
    result = run_cli("search", "language")
    assert result.exit_code == 1
    assert "BAAI/bge-small-en-v1.5 is not downloaded" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("damage", ["state", "index", "both"])
def test_corrupt_or_deleted_sidecar_is_rebuilt(vault_dir, damage):
    add("The user bakes sourdough bread")
    if damage in ("state", "both"):
        (vault_dir / ".memvault/state.db").write_text("{not a database")
    if damage in ("index", "both"):
        for path in (vault_dir / ".memvault/index").rglob("*"):
            if path.is_file():
                path.write_bytes(b"garbage")
    result = run_cli("search", "bread")
    assert result.exit_code == 0, result.stderr
    assert "sourdough" in result.stdout
    assert "rebuild" in result.stderr
    assert run_cli("reindex", "--check").exit_code == 0


def fts_files(vault_dir):
    """The BM25 index's files now (its folder under the table's _indices/)."""
    from memvault.store.index import import_lancedb

    table = import_lancedb().connect(str(vault_dir / ".memvault/index")).open_table("memories")
    [uuid] = [i.index_uuid for i in table.list_indices() if i.name == "index_text_idx"]
    return sorted((vault_dir / ".memvault/index/memories.lance/_indices" / uuid).iterdir())


def scramble(path, seed=0):
    """Random bytes over a tenth of the file, from somewhere in its first half."""
    import random

    data = bytearray(path.read_bytes())
    rnd = random.Random(seed)
    start = rnd.randrange(len(data) // 2)
    for i in range(start, min(len(data), start + max(16, len(data) // 10))):
        data[i] = rnd.randrange(256)
    path.write_bytes(bytes(data))


def garden_scores():
    result = run_cli("search", "--json", "--relevance-floor", "0", "garden roses")
    assert result.exit_code == 0, result.stderr
    return {r["text"]: r["score"] for r in json.loads(result.stdout)}, result.stderr


@pytest.mark.parametrize("recorded", [True, False])
def test_a_damaged_full_text_index_is_found_said_searched_around_and_rebuilt(vault_dir, recorded):
    """Issue 44: random bytes over the BM25 index's files lowered scores silently (or made LanceDB panic,
    which the search swallowed), `reindex --check` said in step, and only `reindex --full` repaired it.
    recorded: memvault wrote the index (its files' checksums are known); else an index from before the
    record, which only a query of it can judge."""
    add("I planted roses in the garden", "The garden gate needs oil", "I took the train to Porto",
        "My sister plays the cello", "The roses by the garden wall bloomed")
    before, _ = garden_scores()
    docs = [p for p in fts_files(vault_dir) if p.name.endswith("_docs.lance" if recorded else "_invert.lance")][0]
    if not recorded:
        (vault_dir / ".memvault/index/fts-checksums.json").unlink(missing_ok=True)
    scramble(docs, seed=2)

    check = run_cli("reindex", "--check")
    assert check.exit_code == 1
    assert check.stdout.startswith("damaged  the full-text index") and "`memvault reindex` rebuilds it" in check.stdout
    assert (str(docs) in check.stdout) == recorded  # the file named where its checksum says which
    stats = run_cli("stats", "--json")
    assert json.loads(stats.stdout)["index"]["in_step"] is False
    during, said = garden_scores()
    assert set(during) == set(before)  # found by meaning alone
    assert said.count("full-text index") == 1 and "went by meaning alone" in said, said

    repaired = run_cli("reindex")
    assert repaired.exit_code == 0, repaired.stderr
    assert "rebuilt the damaged full-text index" in repaired.stdout
    assert run_cli("reindex", "--check").exit_code == 0
    after, said = garden_scores()
    assert after == before and "full-text" not in said


def test_markdown_outside_the_kind_folders_is_no_memory_until_reindex_moves_it_in_then_one_everywhere(vault_dir):
    """Issue 44: entries/loose.md and entries/global/hand.md were indexed (search found them) but stats and
    conversations did not count them, ls and export left them out and rm failed. Now: no command sees
    them, each read says what reindex will do, and reindex adopts them into global/notes/, where every
    command does."""
    add("The user keeps bees")
    loose, hand = vault_dir / "entries/loose.md", vault_dir / "entries/global/hand.md"
    loose.write_text("Loose note: the hive is painted blue\n")
    hand.write_text("Hand note: the honey comes in June\n")

    check = run_cli("reindex", "--check")
    assert check.exit_code == 1
    for path in (loose, hand):
        assert f"memvault: skipped {path}: not where memvault keeps memories" in check.stderr
    assert check.stderr.count("`memvault reindex` moves it into entries/global/notes/ as a note") == 2
    stats = json.loads(run_cli("stats", "--json").stdout)
    assert (stats["memories"], stats["skipped"], stats["index"]["in_step"]) == (1, 2, False)
    assert len(json.loads(run_cli("ls", "--json").stdout)) == 1
    assert len(run_cli("export", "--all").stdout.splitlines()) == 1
    assert json.loads(run_cli("conversations", "--json").stdout)[0]["total"] == 1
    found = run_cli("search", "--json", "--relevance-floor", "0", "hive painted blue")
    assert "hive" not in found.stdout and f"skipped {loose}" in found.stderr

    done = run_cli("reindex")
    assert done.exit_code == 0, done.stderr
    assert "memvault: moved entries/loose.md to entries/global/notes/" in done.stderr
    assert not loose.exists() and not hand.exists()
    assert git(vault_dir, "status", "--porcelain") == ""  # committed where they are now
    listed = {m["text"]: m for m in json.loads(run_cli("ls", "--json").stdout)}
    assert set(listed) == {"The user keeps bees", "Loose note: the hive is painted blue",
                           "Hand note: the honey comes in June"}
    stats = json.loads(run_cli("stats", "--json").stdout)
    assert (stats["by_kind"], stats["skipped"], stats["index"]["in_step"]) == ({"fact": 1, "note": 2}, 0, True)
    assert json.loads(run_cli("conversations", "--json").stdout)[0]["counts"] == {"fact": 1, "note": 2}
    assert len(run_cli("export", "--all").stdout.splitlines()) == 3
    note = listed["Loose note: the hive is painted blue"]
    assert note["path"].startswith("entries/global/notes/") and top("hive painted blue") == note["text"]
    assert run_cli("show", note["id"][:8]).exit_code == 0
    assert run_cli("rm", note["id"][:8]).exit_code == 0
    assert run_cli("reindex", "--check").exit_code == 0


def test_full_rebuild(vault_dir):
    add("alpha memory", "beta memory")
    result = run_cli("reindex", "--full")
    assert result.exit_code == 0 and result.stdout.startswith("2 added")


def test_watch_keeps_the_index_in_sync(vault_dir):
    rel = add("The user drives a Fiat")[0]
    proc = subprocess.Popen([*memvault_command(), "reindex", "--watch"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while "watching" not in (line := proc.stderr.readline()):
            assert time.time() < deadline and line, "watcher did not start"
        # Save the way editors do: write a temp file, then rename it over the original.
        path = vault_dir / rel
        tmp = path.with_name(".edit.tmp")
        tmp.write_text(path.read_text().replace("Fiat", "Tesla"))
        os.replace(tmp, path)
        while True:
            assert time.time() < deadline, "watcher did not sync"
            if "Tesla" in git(vault_dir, "show", "HEAD") and run_cli("reindex", "--check").exit_code == 0:
                break
            time.sleep(0.3)
    finally:
        code = stop_process(proc, timeout=30)
    assert code == 0, proc.stderr.read()  # SIGTERM stops it cleanly
    assert git(vault_dir, "log", "-1", "--format=%s").startswith("memvault reindex: 1 hand edit")


# -- stopping (docs/design.md, "Stopping a long-running command") ---------------------------------------

def _sigint_ignored() -> None:
    """In the child before it runs: SIGINT ignored, as a shell leaves it for a command a script runs in
    the background (`memvault reindex --watch &`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _sigint_default() -> None:
    """In the child before it runs: SIGINT at its default, as from a terminal (whatever this pytest has)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sighup_default() -> None:
    """In the child before it runs: SIGHUP at its default, as from a terminal. A pytest run under `nohup`
    hands its children SIGHUP ignored, and a watcher started so keeps it ignored, as `nohup` asks
    (docs/design.md, "Stopping a long-running command"): SIGHUP is the thing tested here, so it is set."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.parametrize("sig, started_with", [(signal.SIGTERM, None), (signal.SIGHUP, _sighup_default),
                                               (signal.SIGINT, _sigint_default), (signal.SIGINT, _sigint_ignored)],
                         ids=["SIGTERM", "SIGHUP", "Ctrl-C", "SIGINT-started-ignored"])
def test_a_watcher_waiting_for_the_vault_lock_stops_at_once_on_a_signal(vault_dir, sig, started_with):
    """Another process holds the vault lock (a long write) when the watcher starts: it waits, says so,
    and a stop signal ends it at once with status 0, also a SIGINT it started with ignored (the rule for
    SIGINT: a long-running command handles it in every state). It does not go on watching once the lock
    is free. The Ctrl-C cases send SIGINT as the thing tested, to a child started with SIGINT set
    explicitly, at its default or ignored."""
    from memvault.store.vault import Vault

    add("The user keeps bees")
    vault = Vault.open(vault_dir)
    with vault.change("chat"):  # the lock a long write holds
        proc = start_memvault("reindex", "--watch", preexec_fn=started_with)
        try:
            wait_for_line(proc, "to finish with the vault")  # waiting for the lock
            sent = time.monotonic()
            proc.send_signal(sig)
            code = proc.wait(timeout=30)
            took = time.monotonic() - sent  # while the lock is still taken
        finally:
            stop_process(proc)
    _, err = proc.communicate()
    assert code == 0, err
    assert took < 5, took
    assert "Traceback" not in err and "watching" not in err, err


@pytest.mark.slow  # end to end: a watcher paused mid-sync and stopped by SIGTERM (~10 s here)
def test_a_stop_while_the_watcher_syncs_lets_the_sync_finish(vault_dir, tmp_path):
    """SIGTERM while the watcher's first sync holds the vault lock (paused in the index sync): it does
    not stop half way; it finishes the sync, commits the hand edit, and then exits with status 0."""
    add("The user keeps bees")
    note = vault_dir / "entries/global/notes/by-hand.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("The user rows on Sundays\n")
    go = tmp_path / "go"
    proc = start_memvault("reindex", "--watch", env={"PAUSE_AT": f"memvault/store/index.py:reindex;1;{go}"})
    try:
        wait_for_line(proc, "pause_at")  # inside the sync, the vault lock held
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        went_on = proc.poll() is None
        go.touch()
        code = proc.wait(timeout=120)
    finally:
        stop_process(proc)
    out, err = proc.communicate()
    assert went_on, "it stopped in the middle of the sync"
    assert code == 0 and "Traceback" not in err, err
    assert out.startswith("1 added"), out
    assert git(vault_dir, "log", "-1", "--format=%s").startswith("memvault reindex: 1 hand edit")
    assert run_cli("reindex", "--check").exit_code == 0


def test_scan_entries_finds_what_walk_entries_finds(tmp_path):
    from pathlib import Path

    from memvault.store import files
    from memvault.store.index import _scan_entries

    root = tmp_path / "v"
    for rel in ["entries/global/facts/a.md", "entries/global/facts/.hidden.md", "entries/global/facts/#x.md#",
                "entries/global/facts/~b.md", "entries/global/facts/c.md~", "entries/global/facts/d.txt",
                "entries/global/notes/e.md", "entries/global/deleted/facts/gone.md", "entries/work/turns/user/f.md",
                "entries/work/.git/g.md", "entries/top.md", "entries/deleted/h.md"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "i.md").write_text("x")
    os.symlink(root / "elsewhere", root / "entries" / "global" / "linked")  # a symlinked folder is not followed
    os.symlink(root / "elsewhere" / "i.md", root / "entries" / "global" / "facts" / "link.md")
    scanned = _scan_entries(root)
    walked = list(files.walk_entries(root, placed_only=False))
    assert sorted(scanned.values()) == [str(p) for p in walked]
    assert all(Path(v).relative_to(root).as_posix() == k for k, v in scanned.items())
    assert _scan_entries(tmp_path / "nothing-here") == {}


def test_noop_sync_neither_loads_the_model_nor_rewrites_state(vault_dir, monkeypatch):
    from memvault.store import models
    from memvault.store.index import Index
    from memvault.store.vault import Vault

    add("The user owns a kayak", "The user bakes bread")
    Index(Vault.open(vault_dir)).catch_up()  # takes in the add's commit (the record notes what it is synced to)
    state = vault_dir / ".memvault/state.db"
    before = (state.stat().st_mtime_ns, state.read_bytes())

    def no_loading(*args, **kwargs):
        raise AssertionError("a no-op sync loaded the embedding model")

    monkeypatch.setattr(models, "get_embedder", no_loading)
    models._embedders.clear()
    report = Index(Vault.open(vault_dir)).catch_up()
    assert report.unchanged == 2 and not report.drift
    assert (state.stat().st_mtime_ns, state.read_bytes()) == before


def test_many_single_adds_are_compacted(vault_dir):
    from memvault.store.index import COMPACT_FRAGMENTS, Index, _fragments
    from memvault.store.vault import Vault

    for i in range(COMPACT_FRAGMENTS + 4):
        assert run_cli("add", f"The user wrote memory number {i}").exit_code == 0
    table = Index(Vault.open(vault_dir)).table()
    assert 1 <= _fragments(table) < COMPACT_FRAGMENTS
    assert table.count_rows() == COMPACT_FRAGMENTS + 4
    assert top("memory number 17") == "The user wrote memory number 17"


@pytest.mark.slow  # end to end: cold `add`s in child processes beside a warm handle, one after a wait (~12 s here)
def test_a_warm_handle_sees_another_process_s_write_whenever_it_comes(vault_dir):
    """A long-lived process (serve, the agent) reads the table's newest version only when its version
    folder changed (issue 41: LanceDB's checkout_latest cost ~8 ms before every search); another
    process's add is found at once after it, and also long after the handle last looked."""
    import memvault

    add("The user keeps bees")
    with memvault.open_vault(vault_dir) as warm:
        assert [r.text for r in warm.search("bees", top_k=1).results] == ["The user keeps bees"]
        time.sleep(0.2)  # the handle's last look is now older than any clock step
        assert [r.text for r in warm.search("bees", top_k=1).results] == ["The user keeps bees"]
        assert run_memvault("add", "The user rows on Sundays").returncode == 0
        assert [r.text for r in warm.search("rows on Sundays", top_k=1).results] == ["The user rows on Sundays"]
        assert run_memvault("add", "The user swims in the lake").returncode == 0  # right after its last look
        assert [r.text for r in warm.search("swims in the lake", top_k=1).results] == ["The user swims in the lake"]
        table = warm.vault.index.table()
        assert table.count_rows() == 3 and warm.vault.index.state.count() == 3  # read, not repaired


@pytest.mark.slow  # end to end: a `reindex --full` in a child process beside a warm handle (~14 s here)
def test_a_warm_handle_searches_on_after_another_process_rebuilt_the_index(vault_dir):
    """`memvault reindex --full` in another process removes the record (state.db) and makes a new one; a
    server's handle still held the old file, so its next search failed ("attempt to write a readonly
    database") and said the index did not match its files. It reads the new record instead."""
    import memvault

    add("The user keeps bees")
    said: list[str] = []
    with memvault.open_vault(vault_dir, watch=True, notice=said.append) as warm:
        assert [r.text for r in warm.search("bees", top_k=1).results] == ["The user keeps bees"]
        assert run_memvault("reindex", "--full").returncode == 0
        assert run_memvault("add", "The user rebuilt the shed last spring").returncode == 0
        found = warm.search("rebuilt the shed", top_k=1)
        assert [r.text for r in found.results] == ["The user rebuilt the shed last spring"]
        assert not [line for line in said if "did not match" in line], said
        assert warm.vault.index.state.count() == 2


def test_who_waits_for_a_write_reads_before_its_compaction(vault_dir, monkeypatch):
    """A change whose rows someone waits for (serve: a conversation's next message waits for its last
    exchange) lets them read once the rows are in, and compacts the table after: the compaction
    (0.2-0.45 s at 10,000 rows, issue 41) is not part of their wait. The rows are searchable then."""
    from memvault.store import files, index
    from memvault.store.index import Index, _fragments
    from memvault.store.vault import Vault

    for i in range(3):
        assert run_cli("add", f"The user wrote memory number {i}").exit_code == 0
    vault = Vault.open(vault_dir)
    before = _fragments(vault.index.table())
    monkeypatch.setattr(index, "COMPACT_FRAGMENTS", before + 1)  # this change's rows make it due
    seen = []

    def on_indexed():
        seen.append((_fragments(vault.index.table()), vault.index.table().count_rows()))

    with vault.change("chat") as change:
        change.after_index.append(on_indexed)
        change.add(files.new_memory("The standup moved to nine fifteen"))
    assert seen == [(before + 1, 4)]  # its row in, the compaction not made yet
    table = Index(Vault.open(vault_dir)).table()
    assert _fragments(table) < before + 1 and table.count_rows() == 4  # compacted right after
    assert top("standup nine fifteen") == "The standup moved to nine fifteen"


def test_a_write_finds_rows_by_path_through_an_index_and_an_add_makes_one_table_version(vault_dir, monkeypatch):
    """Every write looks the table's rows up by path (a changed file's merge_insert, the rows an
    interrupted sync may have left for a new file): with a B-tree on `path`, not a pass over every row's
    path (issue 44: ~50 ms of CPU per add at 100,000 memories). And an add whose file has no row yet
    deletes nothing: it makes one table version (its rows), not two (an empty delete, then its rows)."""
    from memvault.store import index
    from memvault.store.vault import Vault

    monkeypatch.setattr(index, "FILTER_INDEX_ROWS", 3)  # the indexes of a big vault, on a small one
    # 300 rows in the BM25 index: two more are under its 1%, so no add's upkeep compacts
    add(*[f"The user noted fact number {i} about the garden" for i in range(300)])
    assert run_cli("add", "The user speaks Portuguese").exit_code == 0
    table = index.Index(Vault.open(vault_dir)).table()
    assert "path_idx" in {i.name for i in table.list_indices()}
    before = table.version
    assert run_cli("add", "The user plays the cello").exit_code == 0
    table.checkout_latest()
    assert table.version == before + 1
    assert top("cello") == "The user plays the cello"


def test_old_table_versions_are_pruned_after_a_while_not_kept_for_days(vault_dir, monkeypatch):
    """Each write makes a table version and a compaction rewrites the data beside the old files;
    LanceDB's default kept them 7 days (a server's day of writes: a 26 MB index grew to 5.3 GB).
    Versions younger than KEEP_VERSIONS_SECONDS stay for readers in flight; older ones go."""
    from memvault.store import index

    monkeypatch.setattr(index, "COMPACT_FRAGMENTS", 4)  # a compaction every few adds, not every 16
    versions = vault_dir / ".memvault/index/memories.lance/_versions"
    writes = index.COMPACT_FRAGMENTS + 2
    for i in range(writes):
        assert run_cli("add", f"The user wrote memory number {i}").exit_code == 0
    kept = len(list(versions.iterdir()))
    assert kept > writes  # compacted, but all of them younger than the window: kept for a reader in flight
    monkeypatch.setattr(index, "KEEP_VERSIONS_SECONDS", 0)
    for i in range(index.COMPACT_FRAGMENTS):
        assert run_cli("add", f"The user wrote another memory number {i}").exit_code == 0
    assert len(list(versions.iterdir())) < kept // 2  # pruned at the compaction; only those after it remain
    assert top("another memory number 3") == "The user wrote another memory number 3"


def test_a_warm_reader_whose_table_version_was_pruned_reads_the_newest(vault_dir, monkeypatch):
    """A long-lived reader (serve, mcp) holds the table version it last read; when another
    process's upkeep has pruned it before the reader heard of the change, the search reads the
    newest version instead of failing on a missing data file."""
    import memvault
    from memvault.store import index

    add("The user owns a kayak")
    warm = memvault.open_vault(vault_dir, watch=True)
    try:
        assert warm.search("kayak").results[0].text == "The user owns a kayak"
        # The folder's events are not delivered yet: the watcher is stopped here so that the moment
        # a read comes before them is certain, not a race the test might lose.
        warm._watcher.stop()
        warm._watcher.take_changes()  # and what it heard of the first search's own writes is taken
        monkeypatch.setattr(index, "KEEP_VERSIONS_SECONDS", 0)
        for i in range(index.COMPACT_FRAGMENTS + 1):  # another process's adds, compacted and pruned
            assert run_cli("add", f"The user visited lighthouse number {i}").exit_code == 0
        found = warm.search("lighthouse number 7", top_k=3).results
        assert "The user visited lighthouse number 7" in [r.text for r in found]
    finally:
        warm.close()


# -- nothing lost while git says what changed (docs/design.md, "The index") ---------------------

def test_an_in_place_edit_keeping_size_and_mtime_is_seen_by_the_next_search(vault_dir):
    """Size and mtime alone miss it (what the walk compared); git's stat data and the record's ctime
    do not."""
    path = vault_dir / add("The user drives a blue Volvo", "The user reads science fiction")[0]
    assert top("which car") == "The user drives a blue Volvo"
    before = path.stat()
    text = path.read_text()
    with open(path, "r+", encoding="utf-8") as handle:  # in place: same inode, no rename
        handle.write(text.replace("a blue Volvo", "a red Skoda"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert top("which car") == "The user drives a red Skoda"


def test_an_edit_made_while_no_memvault_process_ran_is_seen_by_a_server_started_later(vault_dir):
    import memvault

    path = vault_dir / add("The user drives a blue Volvo", "The user reads science fiction")[0]
    assert top("which car") == "The user drives a blue Volvo"
    path.write_text(path.read_text().replace("a blue Volvo", "a red Skoda"))
    with memvault.open_vault(vault_dir, watch=True) as vault:  # a server started after the edit
        assert vault.search("which car", top_k=1).results[0].text == "The user drives a red Skoda"


def test_commits_by_hand_and_a_reset_are_seen(vault_dir):
    path = vault_dir / add("The user drives a blue Volvo", "The user reads science fiction")[0]
    assert top("which car") == "The user drives a blue Volvo"
    path.write_text(path.read_text().replace("a blue Volvo", "a red Skoda"))
    git(vault_dir, "commit", "-qam", "new car")  # committed by hand: clean again for git status
    assert top("which car") == "The user drives a red Skoda"
    git(vault_dir, "reset", "-q", "--hard", "HEAD~1")  # the file back as it was, HEAD moved back
    assert top("which car") == "The user drives a blue Volvo"
    assert run_cli("reindex", "--check").exit_code == 0


def test_a_memory_file_git_ignores_is_indexed_and_its_edits_seen(vault_dir):
    add("The user reads science fiction")
    (vault_dir / ".gitignore").write_text((vault_dir / ".gitignore").read_text() + "entries/global/notes/private-*\n")
    note = vault_dir / "entries/global/notes/private-telescope.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("---\nid: 11111111-2222-3333-4444-555555555555\nrole: note\n"
                    "created_at: 2025-01-01T00:00:00Z\n---\nThe user wants a telescope\n")
    assert top("telescope") == "The user wants a telescope"
    note.write_text(note.read_text().replace("a telescope", "a bigger telescope"))
    assert top("telescope") == "The user wants a bigger telescope"


def test_an_uncommitted_write_deleted_by_hand_leaves_the_index(vault_dir):
    """A chat's user turn is indexed before it is committed; if the process dies and the file is
    deleted by hand, git never knew it: the record still watches it."""
    from memvault.store import files
    from memvault.store.vault import Vault

    add("The user reads science fiction")
    assert top("science fiction") == "The user reads science fiction"  # the record is synced to HEAD
    vault = Vault.open(vault_dir)
    with vault.change("chat", commit=False) as change:
        turn = change.add(files.new_memory("I keep bees on the roof", "user", "global"))
    assert top("bees") == "I keep bees on the roof"
    turn.path.unlink()
    assert top("bees") != "I keep bees on the roof"
    assert run_cli("reindex", "--check").exit_code == 0


def test_without_git_every_file_is_compared(vault_dir):
    vault_dir.mkdir()
    (vault_dir / "memvault.toml").write_text("enable_git_versioning = false\n")
    path = vault_dir / add("The user drives a blue Volvo", "The user reads science fiction")[0]
    assert not (vault_dir / ".git").exists()
    assert top("which car") == "The user drives a blue Volvo"
    path.write_text(path.read_text().replace("a blue Volvo", "a red Skoda"))
    assert top("which car") == "The user drives a red Skoda"


def test_a_state_json_of_an_earlier_memvault_is_carried_over_without_embedding_again(vault_dir, monkeypatch):
    from memvault.store.index import Index
    from memvault.store.vault import Vault

    rels = add("The user drives a blue Volvo", "The user reads science fiction")
    state_db = vault_dir / ".memvault/state.db"
    with sqlite3.connect(state_db) as db:
        model = json.loads(db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()[0])
        rows = db.execute("SELECT path, id, size, mtime_ns, sha256 FROM files WHERE live = 1").fetchall()
    state_db.unlink()
    (vault_dir / ".memvault/state.json").write_text(json.dumps({"version": 1, "model": model, "files": {
        path: {"id": i, "size": size, "mtime_ns": mtime, "sha256": digest} for path, i, size, mtime, digest in rows}}))
    from memvault.store import models

    def no_loading(*args, **kwargs):
        raise AssertionError("carrying state.json over loaded the embedding model")

    monkeypatch.setattr(models, "get_embedder", no_loading)
    models._embedders.clear()
    report = Index(Vault.open(vault_dir)).catch_up()
    assert not report.drift and report.unchanged == 2
    assert state_db.exists() and not (vault_dir / ".memvault/state.json").exists()
    assert set(Index(Vault.open(vault_dir)).state.entries()) == set(rels)


def test_a_broken_file_fixed_in_place_is_seen_though_its_folder_did_not_change(vault_dir):
    """Untracked files are only looked for in folders whose mtime moved; a file left out as
    unreadable stays watched, since fixing it in place moves no folder's mtime."""
    add("The user reads science fiction")
    assert top("science fiction") == "The user reads science fiction"
    bad = vault_dir / "entries/global/facts/bad.md"
    bad.write_text("---\nid: [oops\n---\nbroken\n")
    found = run_cli("search", "science fiction")
    assert "skipped" in found.stderr
    folder_mtime = bad.parent.stat().st_mtime_ns
    time.sleep(1.1)  # past the second in which a folder's mtime is not trusted
    assert "skipped" in run_cli("search", "science fiction").stderr  # still said: still watched
    with open(bad, "w", encoding="utf-8") as handle:  # in place: the folder's mtime stays
        handle.write("---\nid: 22222222-2222-3333-4444-555555555555\nrole: memory\n"
                     "created_at: 2025-01-01T00:00:00Z\n---\nThe user restores old radios\n")
    assert bad.parent.stat().st_mtime_ns == folder_mtime
    assert top("radios") == "The user restores old radios"


def test_files_dropped_into_a_new_folder_and_an_old_one_are_found(vault_dir):
    add("The user reads science fiction")
    assert top("science fiction") == "The user reads science fiction"
    time.sleep(1.1)  # the folders' mtimes are trusted from now on
    assert top("science fiction") == "The user reads science fiction"
    assert not (vault_dir / "entries/global/notes").exists()  # a new folder, inside an old one
    for rel, text in [("entries/global/notes/radio.md", "The user restores old radios"),
                      ("entries/global/facts/tea.md", "The user drinks green tea")]:
        path = vault_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    assert top("radios") == "The user restores old radios"
    assert top("green tea") == "The user drinks green tea"


def test_the_bm25_index_takes_in_a_bulk_add_and_leaves_a_few_rows_to_the_scan(vault_dir, monkeypatch):
    """Upkeep after a write: compaction only past COMPACT_FRAGMENTS fragments (at 100,000 rows it
    rewrites them all), the BM25 index brought up to date once more than FTS_UNINDEXED_MAX rows or
    1% of the rows are outside it; the few rows of single adds are searched by a scan meanwhile."""
    from memvault.store import index
    from memvault.store.vault import Vault

    monkeypatch.setattr(index, "FTS_UNINDEXED_MAX", 3)
    add(*[f"The user noted item number {n} of the inventory" for n in range(300)])
    def table():  # a new handle each time: a handle sees only the table version it opened
        return index.Index(Vault.open(vault_dir)).table()
    assert index._unindexed(table()) == 0  # the index was made over every row
    add("The user collects stamps", "The user grows tomatoes")
    assert index._unindexed(table()) == 2  # under 1% of 300 and not past FTS_UNINDEXED_MAX
    assert top("stamps") == "The user collects stamps"  # found by the scan of the unindexed rows
    add("The user sings in a choir", "The user repairs radios")
    assert index._unindexed(table()) == 0 and index._fragments(table()) < index.COMPACT_FRAGMENTS
    assert top("radios") == "The user repairs radios"


def _fragments_of(vault_dir):
    """(id, data files) of each fragment of the vault's table, in order (pylance reads the manifest)."""
    import lance

    dataset = lance.dataset(str(vault_dir / ".memvault/index/memories.lance"))
    return [(f.metadata.id, sorted(d.path for d in f.metadata.files)) for f in dataset.get_fragments()]


def test_a_compaction_merges_the_appends_and_leaves_the_big_fragment_as_it_was(vault_dir, tmp_path, monkeypatch):
    """Issue 41: LanceDB's `optimize` merged every fragment its BM25 index held, so every other
    compaction rewrote the whole table (0.3-0.6 s at 11,000 rows under load, the vault locked). The
    upkeep merges the appends among themselves: across compactions the big fragment keeps its data
    file, the table a few fragments, and the searches give what they give after LanceDB's optimize of
    the same table (the rows, scores and order a cold command shows)."""
    from datetime import datetime, timezone

    import lance

    import memvault
    from memvault.store import index
    from memvault.store.vault import Vault

    lancedb = index.import_lancedb()

    add(*[f"The user noted fact number {i} about the garden" for i in range(300)])  # one fragment
    big = _fragments_of(vault_dir)[0]
    monkeypatch.setattr(index, "_bm25_behind", lambda table: False)  # the adds below not compacted as they go
    monkeypatch.setattr(index, "COMPACT_FRAGMENTS", 10**6)
    vault = memvault.open_vault(vault_dir)
    now = datetime.now(timezone.utc).isoformat()
    questions = ["which fact is about number 7", "what did the user plant in spring", "bees near the pond"]
    for round_ in range(2):  # the second merges the first's merged appends again; the big one stays
        for i in range(5):
            vault.add([f"Round {round_}: the user planted tomatoes number {i} in spring near the pond with bees"])
        assert len(_fragments_of(vault_dir)) >= 6
        shutil.copytree(vault_dir, tmp_path / f"whole{round_}", symlinks=True)
        monkeypatch.setattr(index, "COMPACT_FRAGMENTS", 2)
        upkeep = Vault.open(vault_dir).index
        upkeep._touched = True  # as after a write
        upkeep.maintain()
        monkeypatch.setattr(index, "COMPACT_FRAGMENTS", 10**6)
        after = _fragments_of(vault_dir)
        assert after[0] == big and len(after) <= 3, after  # the appends merged, the big fragment as it was
        lancedb.connect(str(tmp_path / f"whole{round_}/.memvault/index")).open_table("memories").optimize()
        partial = memvault.open_vault(vault_dir)
        whole = memvault.open_vault(tmp_path / f"whole{round_}")
        asked = {"top_k": 8, "all_conversations": True, "now": now}  # one clock: recency is part of the score
        for question in questions:
            mine = [(r.id, r.score, r.text) for r in partial.search(question, **asked).results]
            assert mine and mine == [(r.id, r.score, r.text) for r in whole.search(question, **asked).results]
        assert partial.vault.index.table().count_rows() == 300 + 5 * (round_ + 1)
    # A row of the big fragment replaced (an edit; a secret withheld likewise): the next compaction rewrites
    # that fragment without the old row, and once the versions are pruned no data file holds its text.
    monkeypatch.setattr(index, "KEEP_VERSIONS_SECONDS", 0)
    old = vault.search("fact number 7 about the garden", top_k=1, now=now).results[0]
    assert old.text == "The user noted fact number 7 about the garden"
    vault.edit(old.id, "The user noted fact number 7 about the orchard")
    monkeypatch.setattr(index, "COMPACT_FRAGMENTS", 2)
    upkeep = Vault.open(vault_dir).index
    upkeep._touched = True
    upkeep.maintain()
    dataset = lance.dataset(str(vault_dir / ".memvault/index/memories.lance"))
    assert all(fragment.metadata.num_deletions == 0 for fragment in dataset.get_fragments())
    data = [path.read_bytes() for path in (vault_dir / ".memvault/index/memories.lance/data").iterdir()]
    assert any(b"fact number 7 about the orchard" in b for b in data)
    assert not any(b"fact number 7 about the garden" in b for b in data)


def test_without_pylance_the_upkeep_compacts_the_whole_table_and_says_why_once(vault_dir, monkeypatch):
    """pylance is a dependency; where it cannot be imported (a broken install: here a finder that says it
    is not there, as Python says of a missing package), the upkeep compacts with LanceDB's optimize as
    before and says so once per process. Nothing is lost: every memory is found."""
    import importlib.abc
    import sys

    import memvault
    from memvault.store import index

    class Missing(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "lance":
                raise ModuleNotFoundError("No module named 'lance'", name="lance")
            return None

    monkeypatch.delitem(sys.modules, "lance", raising=False)  # imported by an earlier test: forgotten here
    monkeypatch.setattr(sys, "meta_path", [Missing(), *sys.meta_path])
    monkeypatch.setattr(index, "_WHOLE_SAID", False)
    monkeypatch.setattr(index, "COMPACT_FRAGMENTS", 4)
    said: list[str] = []
    vault = memvault.open_vault(vault_dir, notice=said.append)
    for i in range(9):  # compacted twice, and by the BM25 rule of a small vault after most adds
        vault.add([f"The user visited lighthouse number {i}"])
    whole = [line for line in said if "compacts the whole table" in line]
    assert len(whole) == 1 and "pylance is not installed" in whole[0], said
    table = index.Index(vault.vault).table()
    assert table.count_rows() == 9 and index._fragments(table) < 4
    assert top("lighthouse number 6") == "The user visited lighthouse number 6"
