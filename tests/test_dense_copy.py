"""A long-lived process's copy of the index for the dense retrievers (store/dense_copy.py, issue 41's and
45's warm search): it keeps the rows LanceDB's SQL keeps and orders them as LanceDB's path does, follows
writes by reading only what they added, and a search through it gives what a cold command gives. Real
LanceDB, fastembed and git throughout."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import memvault
from conftest import run_cli
from memvault.reading import retrieval
from memvault.store.dense_copy import DenseCopy
from memvault.store.row_filter import RowFilter

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=timezone.utc)


def us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


LINES = [
    ("club", "user", "Maria: I painted a sunset over the lake yesterday."),
    ("club", "assistant", "John: That sounds lovely, Maria. Did you paint it outdoors?"),
    ("club", "user", "Maria: Yes, by the water, with my new brushes."),
    ("club", "assistant", "John: I bought a kayak last week for the summer."),
    ("club", "user", "Maria: I started cello lessons two weeks ago."),
    ("club", "assistant", "John: My sister moved to Lisbon last month."),
    ("work", "user", "The standup moved to 9:15 on Mondays."),
    ("work", "assistant", "Noted: standup at 9:15 on Mondays."),
    ("work", "user", "Priya owns the billing migration."),
    ("global", "user", "My bike is a blue Brompton."),
    ("global", "assistant", "A blue Brompton, noted."),
    ("global", "user", "I am allergic to peanuts."),
]


@pytest.fixture
def chats(vault_dir, tmp_path):
    """Turns of three conversations a day apart (some naming relative times), facts with tags, imported
    and indexed as a user would."""
    rows = [{"id": str(uuid.uuid4()), "role": role, "conversation_id": conversation, "text": text,
             "created_at": (T0 + timedelta(days=n)).isoformat()} for n, (conversation, role, text) in enumerate(LINES)]
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert run_cli("import", "jsonl", str(path)).exit_code == 0
    vault = memvault.open_vault(vault_dir)
    vault.add("The spare key is under the blue pot.", conversation="global", tags=["house"])
    vault.add("The wifi password is on the fridge.", conversation="work", tags=["house", "office"])
    vault.add("Lena lives in Porto.", conversation="club", tags=["family"], created_at=T0 + timedelta(days=3))
    return vault


def filters() -> list[RowFilter]:
    skip_since = us(T0 + timedelta(days=4))
    return [
        RowFilter(),
        RowFilter(conversations=("club",)),
        RowFilter(conversations=("work", "global")),
        RowFilter(roles=("user",), conversations=("club",)),
        RowFilter(roles=("memory",)),
        RowFilter(tags=("house",)),
        RowFilter(tags=("house", "office")),
        RowFilter(since_us=us(T0 + timedelta(days=2)), until_us=us(T0 + timedelta(days=7))),
        RowFilter(conversations=("club",), skip_turns=("club", skip_since)),
        RowFilter(skip_turns=(None, skip_since)),
        RowFilter(conversations=("club", "global"), time_range=(us(T0), us(T0 + timedelta(days=1)), True)),
        RowFilter(time_range=(us(T0 + timedelta(days=1)), None, True)),
        RowFilter(time_range=(None, us(T0 + timedelta(days=2)), False)),
        RowFilter(conversations=("club",), said_by="Maria"),
        RowFilter(conversations=("club",), said_by="John", roles=("assistant",)),
    ]


def test_the_copy_keeps_the_rows_lancedb_keeps_and_orders_them_the_same(chats):
    """Every filter a search builds (conversations, roles, tags, times, a session's own turns, a time
    range with the times the words name, one speaker's lines) keeps the same rows in the copy as in
    LanceDB's SQL, and the nearest rows come in the same order on both paths."""
    index = chats._vault.index
    table = index.table()
    snapshot = DenseCopy().at(table)
    every = {row["id"] for row in table.search().select(["id"]).limit(None).to_list()}
    assert len(snapshot.rowids) == len(every) == len(LINES) + 3
    skipped_ids = sorted(every)[:2]
    checks = filters() + [RowFilter(conversations=("club",), skip_ids=tuple(skipped_ids))]
    kept_somewhere = set()
    for row_filter in checks:
        by_sql = {row["id"] for row in table.search().where(row_filter.sql()).select(["id"]).limit(None).to_list()} \
            if row_filter.sql() != "true" else every
        by_mask = set(snapshot.columns["id"][row_filter.mask(snapshot.columns)])
        assert by_mask == by_sql, row_filter
        kept_somewhere |= {len(by_sql) > 0}
        for question in ("what did Maria paint", "when is the standup", "where does Lena live"):
            vector = index.embedder.embed_query(question)
            lance = [r["id"] for r in retrieval._dense_rows(table, vector, row_filter, 4)]
            copied = [r["id"] for r in snapshot.nearest(vector, row_filter, 4)]
            assert copied == lance, (row_filter, question)
    assert kept_somewhere == {True, False} or kept_somewhere == {True}
    # The filters are not vacuous: the speaker's, the range's and the tags' keep some rows and not all.
    for row_filter in (checks[5], checks[10], checks[13]):
        kept = row_filter.mask(snapshot.columns).sum()
        assert 0 < kept < len(every), row_filter


def test_the_copy_follows_writes_reading_only_what_they_added(chats):
    """After an add, an edit and a removal the copy answers from the new rows without reading the table
    whole again (a server's store is two turns, not 10,000 rows); a compaction, which gives every row a
    new place, is read whole."""
    index = chats._vault.index
    copy = DenseCopy()
    before = copy.at(index.table())
    assert copy.reads == 1
    added = chats.add("My locker code is 4711.", conversation="work")[0]
    chats.edit(added.id, "My locker code is 9000.")
    lena = next(r for r in chats.search("where does Lena live", conversation="club").results
                if r.text == "Lena lives in Porto.")
    chats.remove(lena.id)
    table = index.table()
    after = copy.at(table)
    assert after.version != before.version and copy.reads == 1  # the new rows only
    texts = set(after.columns["text"][after.alive])
    assert "My locker code is 9000." in texts and "My locker code is 4711." not in texts
    assert "Lena lives in Porto." not in texts
    vector = index.embedder.embed_query("what is my locker code")
    found = after.nearest(vector, RowFilter(conversations=("work",)), 1)
    assert found[0]["text"] == "My locker code is 9000."
    assert [r["id"] for r in found] == [r["id"] for r in retrieval._dense_rows(table, vector, RowFilter(conversations=("work",)), 1)]
    everywhere = RowFilter()
    held = copy.current(table)  # as Index.maintain does around its optimize
    table.optimize()  # the rows rewritten into one fragment: every row a new row id
    copy.after_compaction(table, held)
    compacted = copy.at(table)
    assert compacted.version == table.version and copy.reads == 1  # renumbered by the rows' ids, not read
    assert sorted(compacted.columns["id"][compacted.alive]) == sorted(after.columns["id"][after.alive])
    assert [r["id"] for r in compacted.nearest(vector, everywhere, 5)] == \
        [r["id"] for r in retrieval._dense_rows(table, vector, everywhere, 5)]
    # Rewritten behind its back (another process's upkeep): still the rows LanceDB has.
    chats.add("The boiler was serviced in May.", conversation="global")
    table = index.table()
    table.optimize()
    behind = copy.at(table)
    assert "The boiler was serviced in May." in set(behind.columns["text"][behind.alive])
    assert [r["id"] for r in behind.nearest(vector, everywhere, 5)] == \
        [r["id"] for r in retrieval._dense_rows(table, vector, everywhere, 5)]


def test_a_search_through_the_copy_gives_what_a_cold_command_gives(chats):
    """The same question on the same vault gives the same results, scores and order from a server (the
    copy) as from `memvault search` (LanceDB): speaker, time-range and tag filters included."""
    index = chats._vault.index
    later = (T0 + timedelta(days=30)).isoformat()  # one clock for both: recency is part of the score
    questions = [("What has Maria painted?", {"conversation": "club", "now": later}),
                 ("What happened yesterday?", {"conversation": "club", "now": (T0 + timedelta(days=1)).isoformat()}),
                 ("what did I say in March 2024", {"all_conversations": True, "now": later}),
                 ("where is the spare key", {"tags": ["house"], "all_conversations": True, "now": later}),
                 ("standup time", {"conversation": "work", "now": later}),
                 # --as-of searches a table of the past: the copy of today's is not asked
                 ("where does Lena live", {"conversation": "club", "as_of": (T0 + timedelta(days=4)).isoformat()})]
    cold = [[(r.id, r.score) for r in chats.search(q, top_k=5, **opts).results] for q, opts in questions]
    index.dense_copy = DenseCopy()
    warm = [[(r.id, r.score) for r in chats.search(q, top_k=5, **opts).results] for q, opts in questions]
    assert index.dense_copy.reads == 1  # the searches went through the copy
    assert warm == cold
    assert all(cold)


RESULT_FIELDS = ("id", "path", "role", "conversation_id", "created_at", "text", "meta", "index_text", "told", "_score")


def _bm25_seen(rows: list[dict]) -> list[tuple]:
    """What the read path takes from BM25's rows (retrieval._result, the scores), the vector included."""
    return [(tuple(row.get(name) for name in RESULT_FIELDS), [float(x) for x in row["vector"]]) for row in rows]


def test_bm25_through_the_copy_gives_lancedbs_rows_scores_and_ties(chats):
    """Issue 45's warm search: LanceDB gives a BM25 query's ids and scores only and the copy the rows. Every
    filter and question gives the rows, scores, order and ties past the cut LanceDB's whole rows give; at
    another table version (a write landed since the copy was made) LanceDB's rows are taken, the new one too."""
    index = chats._vault.index
    table = index.table()
    snapshot = DenseCopy().at(table)
    compared = 0
    for row_filter in filters():
        for question in ("Maria painted the lake", "standup Mondays", "blue", "Lena Porto", "what did John buy"):
            lance_ties, copy_ties = {}, {}
            lance = retrieval._bm25_rows(table, question, row_filter.sql(), 2, lance_ties)
            assert retrieval._bm25_from_copy(table, lambda limit: table.search(question, query_type="fts")
                                             .select(["id", "_score"]).limit(limit), 1, None, snapshot) is not None
            copied = retrieval._bm25_rows(table, question, row_filter.sql(), 2, copy_ties, dense=snapshot)
            assert _bm25_seen(copied) == _bm25_seen(lance), (row_filter, question)
            assert {k: r["_score"] for k, r in copy_ties.items()} == {k: r["_score"] for k, r in lance_ties.items()}
            compared += len(lance)
    assert compared > 20  # not vacuous: most filters and questions find rows
    chats.add("The blue kayak is in the garage.", conversation="global")
    table = index.table()
    assert table.version != snapshot.version
    assert retrieval._bm25_from_copy(table, lambda limit: table.search("blue kayak", query_type="fts")
                                     .select(["id", "_score"]).limit(limit), 3, None, snapshot) is None
    copied = retrieval._bm25_rows(table, "blue kayak", "true", 3, dense=snapshot)
    assert _bm25_seen(copied) == _bm25_seen(retrieval._bm25_rows(table, "blue kayak", "true", 3))
    assert copied[0]["text"] == "The blue kayak is in the garage."


def test_a_snapshot_keeps_each_filters_rows_once_and_finds_rows_by_id(chats):
    """Snapshot.kept: the rows of a filter asked again are the ones asked first (kept per snapshot, not
    masked again); rows_by_id gives the live rows in the order asked, None for an id the copy lacks; count
    is the table's row count."""
    index = chats._vault.index
    snapshot = DenseCopy().at(index.table())
    assert snapshot.count() == index.table().count_rows()  # a warm search's row count (BM25's scale)
    for row_filter in filters():
        first = snapshot.kept(row_filter)
        assert snapshot.kept(row_filter) is first
        assert list(first) == list(np.flatnonzero(row_filter.mask(snapshot.columns) & snapshot.alive))
    ids = list(snapshot.columns["id"][::-1])
    assert [row["id"] for row in snapshot.rows_by_id(ids)] == ids
    assert snapshot.rows_by_id([ids[0], "no-such-id"]) is None


def test_a_warm_search_reads_the_full_text_record_again_once_it_changed(chats):
    """A warm process keeps the BM25 index's record as read (Index._fts_record) while its file is the one
    read; the record written anew (a file's recorded size changed here) is read by the next search, which
    finds the file not as recorded and goes by meaning alone."""
    index = chats._vault.index
    index.dense_copy = DenseCopy()
    first = chats.search("where is the spare key", all_conversations=True)
    assert first.full_text_damaged is None and first.results
    record = index.dir / "fts-checksums.json"
    held = json.loads(record.read_text())
    name = sorted(held["files"])[0]
    held["files"][name][0] += 1
    from memvault.store import files as store_files

    store_files.atomic_write(record, json.dumps(held, sort_keys=True) + "\n")
    again = chats.search("where is the spare key", all_conversations=True)
    assert again.full_text_damaged and "not as memvault wrote it" in again.full_text_damaged


def test_what_this_process_writes_is_taken_in_without_reading_it_back(chats):
    """Issue 41: a server's store (a conversation's next message waits for it, then searches) hands its new
    rows to the copy as they go in; the next search reads nothing from the table first, and finds them, as
    a cold command does. An edit (the row replaced by path) likewise; another process's write is read."""
    index = chats._vault.index
    copy = index.dense_copy = DenseCopy()
    later = (T0 + timedelta(days=30)).isoformat()
    chats.search("warm up", conversation="work", now=later)
    assert (copy.reads, copy.looks) == (1, 1)
    added = chats.add("My locker code is 4711.", conversation="work")[0]
    warm = [(r.id, r.score) for r in chats.search("what is my locker code", conversation="work", now=later).results]
    assert copy.looks == 1  # nothing read back: the copy took the rows as they were added
    assert warm[0][0] == added.id
    chats.edit(added.id, "My locker code is 9000.")
    edited = chats.search("what is my locker code", conversation="work", now=later).results
    assert copy.looks == 1
    assert [r.text for r in edited if r.id == added.id] == ["My locker code is 9000."]
    held = copy.at(index.table())
    assert "My locker code is 4711." not in set(held.columns["text"][held.alive])
    # The same answers as a cold command, which asks LanceDB itself.
    index.dense_copy = None
    cold = [(r.id, r.score) for r in chats.search("what is my locker code", conversation="work", now=later).results]
    index.dense_copy = copy
    assert [(r.id, r.score) for r in edited] == cold
    # Another process's write: read (the new rows only), and found.
    other = memvault.open_vault(chats._vault.root)
    other.add("The locker is in the basement.", conversation="work")
    found = [r.text for r in chats.search("where is the locker", conversation="work", now=later).results]
    assert "The locker is in the basement." in found and copy.looks == 2 and copy.reads == 1


def test_a_conversations_turn_vectors_come_from_the_copy_as_lancedb_holds_them(chats, monkeypatch):
    """Issue 41: the episodes' look after every chat of a server (episodes.turn_vectors) reads a conversation's
    turn vectors from the copy, not by a LanceDB query; the same ids and the same floats, a write of this
    process taken in included."""
    index = chats._vault.index
    copy = index.dense_copy = DenseCopy()
    copy.at(index.table())
    chats.add_jsonl(json.dumps({"text": "Maria: I sold the kayak.", "conversation_id": "club", "role": "user"}))
    index.dense_copy = None
    cold = index.vectors(("user", "assistant"), "club")  # LanceDB's rows
    index.dense_copy = copy
    asked = []
    monkeypatch.setattr(type(index), "rows", lambda self, *a, **k: asked.append(a) or [])
    warm = index.vectors(("user", "assistant"), "club")
    assert not asked and (copy.reads, copy.looks) == (1, 1)  # the add taken in, nothing read back
    assert sorted(warm) == sorted(cold) and len(cold) == 7
    for memory_id, vector in cold.items():
        assert np.array_equal(np.asarray(vector, dtype=np.float32), warm[memory_id])


def _held_rows(snapshot) -> dict:
    """id -> (row id, vector, the columns a result carries) of the snapshot's live rows."""
    places = np.flatnonzero(snapshot.alive)
    rows = snapshot._rows(places)
    return {row["id"]: (int(snapshot.rowids[place]), np.asarray(row["vector"], dtype=np.float32).tobytes(),
                        tuple(row.get(name) for name in RESULT_FIELDS if name != "_score"))
            for place, row in zip(places.tolist(), rows)}


def test_a_compaction_of_the_appends_renumbers_only_their_rows_and_the_copy_is_a_fresh_read(chats, monkeypatch):
    """Issue 41: the upkeep's compaction merges the appends and leaves the big fragment as it is
    (Index._compact), so the merged rows get new row ids and the big fragment's keep theirs, across
    compactions. A server's copy takes the new ids by the rows' ids (after_compaction), without reading the
    table, and then holds what a fresh read holds: each row with its row id, vector and columns; its
    searches give a cold command's answers."""
    import lance

    from memvault.store import index as index_module

    monkeypatch.setattr(index_module, "_bm25_behind", lambda table: False)  # compacted when this test says
    monkeypatch.setattr(index_module, "COMPACT_FRAGMENTS", 2)
    index = chats._vault.index
    index._touched = True
    index.maintain()  # the fixture's rows (all in the BM25 index) made one fragment
    monkeypatch.setattr(index_module, "SETTLED_ROWS", 4)  # which is the big fragment here,
    monkeypatch.setattr(index_module, "SETTLED_RATIO", 2)  # left while the rows after it are under half of it
    copy = index.dense_copy = DenseCopy()
    later = (T0 + timedelta(days=30)).isoformat()
    questions = [("what did Maria paint", {"conversation": "club"}), ("locker code", {"all_conversations": True}),
                 ("where is the spare key", {"tags": ["house"], "all_conversations": True})]
    chats.search("warm up", conversation="work", now=later)
    assert copy.reads == 1

    def fragments():
        return [f.metadata for f in lance.dataset(str(index.dir / "memories.lance")).get_fragments()]

    [first] = fragments()
    snapshot = copy.at(index.table())
    big = {i: r for i, r in zip(snapshot.columns["id"].tolist(), snapshot.rowids.tolist()) if r >> 32 == first.id}
    assert len(big) == first.num_rows
    for round_ in range(2):  # the second merges the first's rows again
        monkeypatch.setattr(index_module, "COMPACT_FRAGMENTS", 10**6)
        for n in range(2):
            chats.add(f"My locker code is {round_}{n}11.", conversation="work")
        monkeypatch.setattr(index_module, "COMPACT_FRAGMENTS", 2)
        chats.add(f"The spare key of round {round_} is under the mat.", conversation="global", tags=["house"])
        table = index.table()
        after = fragments()
        assert len(after) <= 3 and after[0].to_json() == first.to_json()  # the appends merged, the big one left
        held = copy.at(table)
        assert held.version == table.version and copy.reads == 1  # renumbered by id, not read again
        fresh = DenseCopy().at(table)
        assert _held_rows(held) == _held_rows(fresh)
        assert {i: r for i, r in zip(fresh.columns["id"].tolist(), fresh.rowids.tolist()) if i in big} == big
        warm = [[(r.id, r.score) for r in chats.search(q, now=later, **o).results] for q, o in questions]
        index.dense_copy = None
        cold = [[(r.id, r.score) for r in chats.search(q, now=later, **o).results] for q, o in questions]
        index.dense_copy = copy
        assert warm == cold and all(warm)
