#!/usr/bin/env python3
"""The index's compaction at a server's pace (issue 41; docs/design.md, "The index").

    python bench/compaction.py VAULT [--cycles 8] [--out bench/out/compaction.json]

On a copy of VAULT (never the vault itself), with a server's copy of the table held (DenseCopy): cycles of
15 adds of two chat turns each (one fragment each, no upkeep between them), then the upkeep that a 16th
fragment makes due (`Index.maintain`: the compaction, the new rows into the indexes, old versions pruned,
the copy renumbered). Per compaction: wall, the process's CPU (LanceDB's and pylance's threads included),
the fragments before and after, and whether the copy was read whole again. The first cycle also prunes the
versions the copy brought along (older than 10 minutes): the figures are of the others.

Run it with PYTHONPATH=CHECKOUT to measure another checkout's upkeep (bench/README.md, "Session 8").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault")
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--out", default=str(HERE / "out" / "compaction.json"))
    args = parser.parse_args()

    import memvault
    from memvault.store import index as ix
    from memvault.store.dense_copy import DenseCopy

    work = Path(tempfile.mkdtemp(prefix="memvault-compaction-"))
    try:
        copy = work / "vault"
        subprocess.run(["cp", "-a", args.vault, str(copy)], check=True)
        vault = memvault.open_vault(copy, notice=lambda message: None)
        index = vault.vault.index
        index.dense_copy = DenseCopy()  # as a server holds it
        vault.search("warm up", all_conversations=True)
        due, behind = ix.COMPACT_FRAGMENTS, ix._bm25_behind
        cycles = []
        for cycle in range(args.cycles + 1):
            ix.COMPACT_FRAGMENTS, ix._bm25_behind = 10**9, (lambda table: False)  # no upkeep between the adds
            try:
                for n in range(due - 1):
                    vault.add([f"Cycle {cycle} turn {n}: the user asked about the weather in Lisbon.",
                               f"Cycle {cycle} turn {n}: it was sunny all week."], conversation=f"bench-{cycle}")
            finally:
                ix.COMPACT_FRAGMENTS, ix._bm25_behind = due, behind
            before = ix._fragments(index.table())
            reads = index.dense_copy.reads
            index._touched = True  # as after a write
            wall, used = time.perf_counter(), cpu()
            index.maintain()
            wall, used = time.perf_counter() - wall, cpu() - used
            table = index.table()
            cycles.append({"cycle": cycle, "fragments_before": before, "fragments_after": ix._fragments(table),
                           "rows": table.count_rows(), "wall_ms": round(wall * 1000, 1),
                           "cpu_ms": round(used * 1000, 1), "copy_read_whole": index.dense_copy.reads - reads,
                           "load_1min": round(os.getloadavg()[0], 2)})
            print(json.dumps(cycles[-1]), flush=True)
        steady = cycles[1:]
        summary = {name: {"p50": statistics.median(c[name] for c in steady), "min": min(c[name] for c in steady),
                          "max": max(c[name] for c in steady)} for name in ("wall_ms", "cpu_ms")}
        print(f"compaction at {steady[-1]['rows']:,} rows ({len(steady)} cycles, load "
              f"{steady[0]['load_1min']} -> {steady[-1]['load_1min']}): wall p50 {summary['wall_ms']['p50']:.0f} ms "
              f"({summary['wall_ms']['min']:.0f}-{summary['wall_ms']['max']:.0f}), CPU p50 "
              f"{summary['cpu_ms']['p50']:.0f} ms ({summary['cpu_ms']['min']:.0f}-{summary['cpu_ms']['max']:.0f}); "
              f"fragments {steady[-1]['fragments_before']} -> {steady[-1]['fragments_after']}")
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"memvault": memvault.__file__, "cycles": cycles, "summary": summary}, indent=1) + "\n")
        print(f"wrote {out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
