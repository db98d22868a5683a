"""The same query on the same files gives the same list, every time (issue 44, item 7): cold (a new
process per search), warm (one long-lived vault whose table rows were rewritten under it) and on a
re-imported copy (export, then import into a new vault: the same files, an index built another way).

The candidates are tied on purpose: forty memories with the same words and the same time in forty
conversations, so that every score (dense, BM25, fused, recency) is equal and only the tie-break decides.
LanceDB hands equal rows back in its table's order, which the history of writes sets."""

from __future__ import annotations

import json
import random

from conftest import run_memvault

TIED = "I watered the garden"
NOW = "2026-11-27T12:00:00Z"
QUERY = ("search", "garden", "--all-conversations", "--now", NOW, "--json")


def vault_lines() -> str:
    conversations = [f"c{i:02d}" for i in range(40)]
    random.Random(7).shuffle(conversations)  # rows in an order that is not the files' order
    lines = [{"text": TIED, "conversation_id": c, "created_at": "2026-11-20T08:00:00Z"} for c in conversations]
    lines += [{"text": f"filler {i}: the trains ran late in the rain", "created_at": "2026-11-01T08:00:00Z"}
              for i in range(30)]
    return "".join(json.dumps(line) + "\n" for line in lines)


def ids(vault, *args) -> list[str]:
    """`memvault search` in a process of its own, as a user runs it."""
    result = run_memvault("--vault", str(vault), *QUERY, *args)
    assert result.returncode == 0, result.stderr
    return [r["id"] for r in json.loads(result.stdout)]


def searched(opened, top_k: int = 5) -> list[str]:
    return [r.id for r in opened.search("garden", all_conversations=True, now=NOW, top_k=top_k).results]


def tied_ids(vault) -> list[str]:
    return sorted(p.name.split("__")[1][:-3] for p in (vault / "entries").glob("c*/facts/*.md"))


def test_tied_candidates_come_back_in_one_order_cold_warm_and_on_a_reimported_copy(tmp_path):
    import memvault

    vault, copy = tmp_path / "vault", tmp_path / "copy"
    opened = memvault.open_vault(vault)
    opened.add_jsonl(vault_lines())
    # Equal scores are ordered by id: the five smallest ids of the forty, not the first five rows met.
    expected = tied_ids(vault)[:5]
    assert [searched(memvault.open_vault(vault)) for _ in range(3)] == [expected] * 3  # each opened anew

    # Warm: one long-lived vault, searching while its rows are rewritten (a hand edit taken back
    # leaves the file byte for byte as it was, and its row at the end of the table).
    assert searched(opened) == expected
    for path in sorted((vault / "entries").glob("c*/facts/*.md"))[:6]:
        kept = path.read_bytes()
        path.write_bytes(kept.replace(TIED.encode(), b"I watered the garden twice"))
        opened.search("trains", all_conversations=True, now=NOW)
        path.write_bytes(kept)
    assert searched(opened) == expected

    # A re-imported copy: the same files, an index built in the files' order.
    exported = tmp_path / "export.jsonl"
    opened.export(exported, all_conversations=True)
    memvault.open_vault(copy).import_from("jsonl", exported)
    assert ids(copy) == expected  # the CLI, in a process of its own
    # Deeper lists agree too (the tie spans the retrievers' cut: 15 candidates each of 40 tied).
    assert searched(memvault.open_vault(copy), 12) == searched(opened, 12) == tied_ids(vault)[:12]
