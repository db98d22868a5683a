"""A scripted session on two machines (issue 27, "Done when"): a vault on machine A pushed to a bare
remote and cloned on machine B; memories added, edited on both, deleted on one; syncs both ways, an
undo, a restore, a hand edit and `reindex --check`. At each stop, and at the end on both machines,
what the vault says about itself agrees: `reindex --check`, `stats` and `log` (every commit memvault
made has its line, each memory's changes are the ones its commit's trailers name, and `log ID` finds
every commit that touched the memory).

Real components throughout: git and a bare repository, LanceDB, the bundled embedder, the CLI
(in-process, so the model loads once).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import memvault
from conftest import git, run_cli

# A trailer's event, as the action `log` shows for that memory (a removal of a tombstone is "purged").
TRAILER_ACTIONS = {"Memvault-Added": {"added"}, "Memvault-Deleted": {"deleted"}, "Memvault-Edited": {"edited"},
                   "Memvault-Evicted": {"evicted"}, "Memvault-Restored": {"restored"},
                   "Memvault-Removed": {"removed", "purged"}}


def mv(machine: Path, *args: str):
    done = run_cli("--vault", str(machine), *args)
    return done


def mv_json(machine: Path, *args: str):
    done = mv(machine, *args, "--json")
    assert done.exit_code == 0, (args, done.stderr)
    return json.loads(done.stdout)


def trailers(machine: Path) -> dict[str, tuple[str, dict[str, set[str]], list[str]]]:
    """{commit: (subject, {memory id: the actions its trailers allow}, [ids a merge resolved])} of every
    commit memvault made (its first commit, which only makes the vault, left out)."""
    out = git(machine, "log", "--format=%x1e%H%x1f%s%x1f%(trailers:only,unfold)")
    found = {}
    for record in out.split("\x1e")[1:]:
        sha, subject, body = record.split("\x1f")
        if not subject.startswith("memvault ") or subject.startswith("memvault init:"):
            continue
        events: dict[str, set[str]] = {}
        resolved = []
        for line in body.splitlines():
            key, _, value = line.partition(": ")
            if key == "Memvault-Replaced":
                old, _, new = value.partition(" -> ")
                events[old] = {"replaced"}
                events.setdefault(new, {"added"})
            elif key in TRAILER_ACTIONS:
                events[value] = TRAILER_ACTIONS[key]
            elif key == "Memvault-Resolved":
                resolved.append(value.split(": ", 1)[0])
        found[sha] = (subject, events, resolved)
    return found


def assert_truthful(machine: Path) -> None:
    """reindex --check, stats and log agree with each other and with git."""
    check = mv(machine, "reindex", "--check")
    assert check.exit_code == 0 and check.stdout == "", (machine, check.stdout, check.stderr)
    stats = mv_json(machine, "stats")
    assert stats["index"]["in_step"] and stats["index"]["out_of_step"] == "" and stats["skipped"] == 0
    live = mv_json(machine, "ls", "-n", "1000")
    assert stats["memories"] == len(live) == stats["index"]["rows"]
    log = {entry["commit"]: entry for entry in mv_json(machine, "log")}
    made = trailers(machine)
    assert set(made) <= set(log), f"commits memvault made with no line in log: {set(made) - set(log)}"
    for sha, (subject, events, resolved) in made.items():
        shown = {change["id"]: change["action"] for change in log[sha]["changes"]}
        if resolved:  # a sync's merge: each memory it settled, as resolved
            assert {i: shown.get(i) for i in resolved} == {i: "resolved" for i in resolved}, subject
            continue
        named = {i: shown.get(i) for i in events}
        assert all(named[i] in events[i] for i in events), (subject, events, shown)
    for memory in live:  # every commit a memory's trailers name is in its own story
        story = {entry["commit"] for entry in mv_json(machine, "log", memory["id"][:8])}
        touching = {sha for sha, (_, events, resolved) in made.items()
                    if memory["id"] in events or memory["id"] in resolved}
        assert touching <= story, (memory["text"], touching - story)


@pytest.mark.slow  # end to end: two machines and a remote through the CLI (~13 s here)
def test_two_machines_a_session_and_the_vault_tells_the_truth(tmp_path, embedder):
    bare, a, b = tmp_path / "remote.git", tmp_path / "a", tmp_path / "b"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)

    # Machine A: two memories, pushed; machine B: a clone.
    [bees, anne, tea] = [m["id"] for m in mv_json(a, "add", "--each-line",
                                                   "The user keeps bees\nAnne is my wife\nThe user drinks tea")]
    git(a, "remote", "add", "origin", str(bare))
    assert mv(a, "sync").exit_code == 0
    assert run_cli("clone", str(bare), str(b)).exit_code == 0
    for machine in (a, b):
        assert_truthful(machine)

    # Edited on both machines; deleted on one and edited on the other.
    memvault.open_vault(a).edit(bees, "The user keeps bees in Porto")
    memvault.open_vault(b).edit(bees, "The user keeps bees in Lisbon")
    memvault.open_vault(b).edit(anne, "Anne is my wife since 2010")
    assert mv(a, "rm", anne).exit_code == 0
    assert mv(b, "add", "The user learns Welsh").exit_code == 0

    # Sync both ways: A pushes, B merges (two conflicts settled) and pushes, A fast-forwards.
    for machine in (a, b, a):
        done = mv(machine, "sync")
        assert done.exit_code == 0, done.stderr
    merged = mv_json(b, "log", "-n", "1")[0]
    assert merged["command"] == "sync" and {c["action"] for c in merged["changes"]} == {"resolved", "replaced"}
    for machine in (a, b):
        assert_truthful(machine)

    # Undo on A (the newest change not a merge), restore on B (the version of the bees that lost), sync.
    undone = mv(a, "undo")  # B's add, which the merge brought in
    assert undone.exit_code == 0 and "REMOVE" in undone.stdout and "The user learns Welsh" in undone.stdout
    [lost] = [m for m in mv_json(b, "ls", "--deleted") if m["meta"].get("replaced_by") == bees]
    assert mv(b, "restore", lost["id"][:8]).exit_code == 0
    for machine in (a, b, a):
        assert mv(machine, "sync").exit_code == 0

    # A hand edit on A: reindex --check sees it (and stats agrees), reindex commits it, sync.
    [tea_file] = [a / m["path"] for m in mv_json(a, "ls") if m["id"] == tea]
    tea_file.write_text(tea_file.read_text().replace("tea", "green tea"))
    check = mv(a, "reindex", "--check")
    assert check.exit_code == 1 and check.stdout.startswith("changed ")
    assert not mv_json(a, "stats")["index"]["in_step"]
    assert "committed 1 hand edit" in mv(a, "reindex").stdout
    for machine in (a, b, a):
        assert mv(machine, "sync").exit_code == 0

    # The end: the same history on both machines, and each tells the truth about itself.
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")
    assert git(a, "status", "--porcelain") == git(b, "status", "--porcelain") == ""
    for machine in (a, b):
        assert_truthful(machine)
    logs = [[(e["commit"], [(c["id"], c["action"]) for c in e["changes"]]) for e in mv_json(m, "log")] for m in (a, b)]
    assert logs[0] == logs[1]
    stats = [mv_json(m, "stats") for m in (a, b)]
    assert [s["memories"] for s in stats] == [len(mv_json(m, "ls", "-n", "1000")) for m in (a, b)]
    assert stats[0]["by_kind"] == stats[1]["by_kind"] and stats[0]["deleted"] == stats[1]["deleted"]
    texts = {m["text"] for m in mv_json(b, "ls", "-n", "1000")}
    assert texts == {"The user keeps bees in Lisbon", "The user keeps bees in Porto", "Anne is my wife since 2010",
                     "The user drinks green tea"}
