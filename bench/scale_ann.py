#!/usr/bin/env python3
"""Dense search at scale: exact (flat) search against bitmap filter indexes and ANN indexes (issue 20).

Runs the dense half of a search (the product's scope filter: one conversation, then `global`)
for every bench/synth.py query, 3 times, on the LanceDB table of a vault built by
bench/scale.py, and prints CPU and wall time per query, peak RSS, and each variant's recall@10
against flat search (the rows flat search finds, the variant's top 10 holds). An index is made
on the table given, so point it at a copy:

    cp -r /work/bench-vaults/new/vault-100000/.memvault/index /tmp/ann-ivf && \\
        python bench/scale_ann.py /tmp/ann-ivf ivf_pq --build && python bench/scale_ann.py /tmp/ann-ivf ivf_pq
    python bench/scale_ann.py --compare /tmp/ann-flat.json /tmp/ann-ivf_pq.json ...

Variants: flat (no index), bitmap (bitmap indexes on role and conversation_id: what memvault
makes from 5,000 rows), ivf_pq (256 partitions, 48 sub-vectors, nprobes 20, refine 5),
hnsw_sq (IVF_HNSW_SQ, 8 partitions).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

VARIANTS = ("flat", "bitmap", "ivf_pq", "hnsw_sq")


def build(table, variant: str) -> None:
    if variant == "ivf_pq":
        table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_PQ",
                           num_partitions=256, num_sub_vectors=48)
    elif variant == "hnsw_sq":
        table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ", num_partitions=8)
    elif variant == "bitmap":
        table.create_scalar_index("conversation_id", index_type="BITMAP")
        table.create_scalar_index("role", index_type="BITMAP")


def measure(table, variant: str) -> dict:
    import synth
    from memvault.store.index import where_clause
    from memvault.store.models import get_embedder

    embedder = get_embedder("memvault/all-MiniLM-L6-v2-int8")
    queries = [(conversation, q, embedder.embed([q])[0]) for conversation, q in synth.QUERIES]
    results, n = {}, 0
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(3):
        for conversation, q, vector in queries:
            for scope in (conversation, "global"):
                search = (table.search([float(x) for x in vector], vector_column_name="vector").metric("cosine")
                          .where(where_clause(("memory", "note", "decision"), scope), prefilter=True))
                if variant == "ivf_pq":
                    search = search.nprobes(20).refine_factor(5)
                rows = search.limit(30).select(["id", "text"]).to_list()
                results[f"{q}|{scope}"] = [(r["text"], round(r["_distance"], 5)) for r in rows]
                n += 1
    return {"variant": variant, "cpu_per_query": (time.process_time() - cpu) / n,
            "wall_per_query": (time.perf_counter() - wall) / n,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "load": os.getloadavg()[0], "results": results}


def compare(paths: list[Path]) -> None:
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    flat = next((r for r in reports if r["variant"] == "flat"), None)
    print("| variant | CPU / query | wall / query | peak RSS | recall@10 vs flat |")
    print("|---|---|---|---|---|")
    for r in reports:
        recall = []
        for key, rows in (flat or r)["results"].items():
            want = Counter(text for text, _ in rows[:10])
            got = Counter(text for text, _ in r["results"].get(key, [])[:10])
            recall.append(sum((want & got).values()) / max(sum(want.values()), 1))
        print(f"| {r['variant']} | {r['cpu_per_query'] * 1000:.0f} ms | {r['wall_per_query'] * 1000:.0f} ms | "
              f"{r['maxrss_mb']:.0f} MB | {sum(recall) / len(recall):.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index_dir", nargs="?", type=Path, help="a LanceDB folder (a vault's .memvault/index, copied)")
    ap.add_argument("variant", nargs="?", choices=VARIANTS)
    ap.add_argument("--build", action="store_true", help="make the variant's index on the table, then stop")
    ap.add_argument("--compare", nargs="+", type=Path, metavar="JSON", help="the table of earlier runs' reports")
    args = ap.parse_args(argv)
    if args.compare:
        compare(args.compare)
        return 0
    if args.index_dir is None or args.variant is None:
        ap.error("give INDEX_DIR and VARIANT (or --compare)")
    from memvault.store.index import import_lancedb

    table = import_lancedb().connect(str(args.index_dir)).open_table("memories")
    if args.build:
        cpu, wall = time.process_time(), time.perf_counter()
        build(table, args.variant)
        print(f"built {args.variant}: {time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s CPU")
        return 0
    print(json.dumps(measure(table, args.variant)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
