#!/usr/bin/env python3
"""Micro-benchmarks behind the index and model changes of issue 5, each as an A/B in one process.

    python bench/micro.py            # all three, a few seconds to a minute
    python bench/micro.py --quick    # smaller inputs

1. padding: a batch is padded to its longest text. Tokens the model computes (padded) per real
   token, and embedding throughput, for texts in file order vs sorted by length (what
   models.Embedder.embed now does), on the synthetic vault's texts and on LoCoMo turns.
2. fragments: every `add` appends one small fragment to the LanceDB table. Time of one dense +
   one BM25 query on a table of 2,000 rows plus 1,000 rows added in one go vs added one by one,
   and after table.optimize() (what the sync now does past index.COMPACT_FRAGMENTS fragments).
3. rows: handing a batch of rows to LanceDB as Python dicts with vectors as lists of floats vs
   as one Arrow table (index.Index._arrow_rows).
4. front matter: reading (files.parse_memory) and writing (files.render) a typical memory file,
   per file, for this checkout and, with --baseline CHECKOUT, for another checkout's files.py
   loaded beside it (issue 17: python-frontmatter vs the pyyaml code before it), interleaved;
   the pure-Python PyYAML classes (yaml.safe_load / safe_dump of the header) as the reference.

Writes bench/out/micro.json and prints the figures. Medians of interleaved repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's memvault
import synth  # noqa: E402

LOCOMO = HERE.parent.parent / "shared" / "bench" / "locomo" / "locomo_memories.jsonl"


def padding(n: int, repeats: int) -> dict:
    from tokenizers import Tokenizer

    from memvault.store.models import get_embedder

    tok_dir = Path(__import__("memvault").__file__).parent / "data" / "minilm-tokenizer"
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    sets = {"synthetic": [r["text"] for r in synth.memories(n)]}
    if LOCOMO.exists():
        sets["locomo"] = [json.loads(line)["content"] for line in open(LOCOMO, encoding="utf-8")][:n]
    model = get_embedder()._model  # the fastembed model itself: no sorting inside
    out = {}
    for name, texts in sets.items():
        lengths = [len(e.ids) for e in tok.encode_batch(texts)]
        ordered = sorted(texts, key=len)
        row = {"texts": len(texts), "mean_tokens": sum(lengths) / len(lengths)}
        sorted_lengths = [len(e.ids) for e in tok.encode_batch(ordered)]  # by characters, as the product sorts
        for label, lens in (("file_order", lengths), ("sorted", sorted_lengths)):
            padded = sum(max(lens[i:i + 64]) * len(lens[i:i + 64]) for i in range(0, len(lens), 64))
            row[f"padded_per_token_{label}"] = padded / sum(lengths)
        times = {"file_order": [], "sorted": []}
        for _ in range(repeats):
            for label, batch in (("file_order", texts), ("sorted", ordered)):
                start = time.perf_counter()
                for _ in model.embed(batch, batch_size=64):
                    pass
                times[label].append(time.perf_counter() - start)
        for label, values in times.items():
            row[f"per_s_{label}"] = len(texts) / statistics.median(values)
        row["speedup"] = row["per_s_sorted"] / row["per_s_file_order"]
        out[name] = row
    return out


def fragments(repeats: int) -> dict:
    import lancedb
    import numpy as np

    from memvault.store.index import FTS_OPTIONS

    texts = [r["text"] for r in synth.memories(3000)]
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((3000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    def rows(a, b):
        return [{"id": str(i), "text": texts[i], "role": "memory", "vector": vectors[i].tolist()} for i in range(a, b)]

    out = {}
    work = Path(tempfile.mkdtemp(prefix="memvault-micro-"))
    try:
        for mode in ("one_add", "1000_adds"):
            db = lancedb.connect(str(work / mode))
            table = db.create_table("m", data=rows(0, 2000))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                table.create_fts_index("text", replace=True, **FTS_OPTIONS)
            if mode == "one_add":
                table.add(rows(2000, 3000))
            else:
                for i in range(2000, 3000):
                    table.add(rows(i, i + 1))
            query = vectors[5].tolist()

            def pair():
                start = time.perf_counter()
                table.search(query, vector_column_name="vector").metric("cosine") \
                    .where("role IN ('memory')", prefilter=True).limit(15).to_list()
                table.search("Dana project review", query_type="fts", fts_columns="text") \
                    .where("role IN ('memory')", prefilter=True).limit(15).to_list()
                return time.perf_counter() - start

            before = statistics.median(pair() for _ in range(repeats))
            fragments_before = table.stats()["fragment_stats"]["num_fragments"]
            start = time.perf_counter()
            table.optimize()
            optimize_s = time.perf_counter() - start
            after = statistics.median(pair() for _ in range(repeats))
            out[mode] = {"fragments": fragments_before, "query_pair_ms": 1000 * before,
                         "optimize_s": optimize_s, "query_pair_ms_after_optimize": 1000 * after}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def arrow_rows(n: int, repeats: int) -> dict:
    import lancedb
    import numpy as np
    import pyarrow as pa

    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), 384))])
    texts = [r["text"] for r in synth.memories(n)]
    vectors = np.random.default_rng(1).standard_normal((n, 384)).astype(np.float32)
    times = {"dicts": [], "arrow": []}
    work = Path(tempfile.mkdtemp(prefix="memvault-micro-"))
    try:
        db = lancedb.connect(str(work))
        for r in range(repeats):
            for label in ("dicts", "arrow"):
                table = db.create_table(f"{label}{r}", schema=schema)
                start = time.perf_counter()
                if label == "dicts":
                    table.add([{"id": str(i), "text": texts[i], "vector": [float(x) for x in vectors[i]]}
                               for i in range(n)])
                else:
                    flat = pa.array(vectors.reshape(-1), type=pa.float32())
                    table.add(pa.Table.from_pydict({"id": [str(i) for i in range(n)], "text": texts,
                                                    "vector": pa.FixedSizeListArray.from_arrays(flat, 384)},
                                                   schema=schema))
                times[label].append(time.perf_counter() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"rows": n, **{f"{k}_s": statistics.median(v) for k, v in times.items()}}


def front_matter(n: int, repeats: int, baseline: Path | None) -> dict:
    """CPU ms per file (this thread's: other processes' load stretches it less than wall time) to read
    and to write a typical memory, per implementation, interleaved."""
    import importlib.util
    import timeit

    import yaml

    from memvault.store import files

    impls = {"this checkout": files}
    if baseline is not None:
        spec = importlib.util.spec_from_file_location("baseline_files", baseline / "memvault" / "files.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["baseline_files"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        impls = {f"baseline ({baseline})": module, **impls}
    memories = [files.new_memory(r["text"], conversation_id=r.get("conversation_id", "global"),
                                 extra={k: v for k, v in r.items() if k in ("tags", "source", "rationale", "meta")})
                for r in synth.memories(n)]
    texts = [files.render(m) for m in memories]
    root = Path("/tmp/memvault-micro")
    paths = [root / files.relative_path_for(m) for m in memories]
    headers = [t.split("---\n")[1] for t in texts]
    metas = [m.front_matter() for m in memories]
    options = dict(sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    clock = time.thread_time
    runs: dict[str, dict[str, list[float]]] = {name: {"read": [], "write": []} for name in
                                                [*impls, "pure-Python PyYAML (header only)"]}
    for r in range(repeats):
        for name, module in (list(impls.items()) if r % 2 == 0 else list(impls.items())[::-1]):  # A B, B A, ...
            assert [module.render(m) for m in memories] == texts  # byte for byte the same files
            runs[name]["read"].append(timeit.timeit(
                lambda: [module.parse_memory(t, p, None, root) for t, p in zip(texts, paths)], number=1,
                timer=clock) / n)
            runs[name]["write"].append(timeit.timeit(lambda: [module.render(m) for m in memories], number=1,
                                                     timer=clock) / n)
        pure = runs["pure-Python PyYAML (header only)"]
        pure["read"].append(timeit.timeit(lambda: [yaml.load(h, Loader=yaml.SafeLoader) for h in headers],
                                          number=1, timer=clock) / n)
        pure["write"].append(timeit.timeit(lambda: [yaml.dump(m, Dumper=yaml.SafeDumper, **options) for m in metas],
                                           number=1, timer=clock) / n)
    return {"files": n, **{name: {k: 1000 * statistics.median(v) for k, v in row.items()} for name, row in runs.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "micro.json")
    ap.add_argument("--baseline", type=Path, metavar="CHECKOUT", help="also time front matter with the files.py of "
                                                                        "this other checkout (e.g. /work/main)")
    ap.add_argument("--only", choices=["padding", "fragments", "rows", "front_matter"], action="append",
                    help="run only these (repeatable)")
    args = ap.parse_args(argv)
    n, repeats = (200, 1) if args.quick else (1000, 3)
    wanted = set(args.only or ["padding", "fragments", "rows", "front_matter"])
    report = {}
    if "padding" in wanted:
        report["padding"] = padding(n, repeats)
    if "fragments" in wanted:
        report["fragments"] = fragments(5 if args.quick else 15)
    if "rows" in wanted:
        report["rows"] = arrow_rows(10 * n, repeats)
    if "front_matter" in wanted:
        report["front_matter"] = front_matter(500 if args.quick else 2000, 3 if args.quick else 9, args.baseline)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    if "padding" in report:
        print("1. length-sorted batches (batch 64)")
        for name, row in report["padding"].items():
            print(f"   {name:9s} {row['texts']} texts, {row['mean_tokens']:.1f} tokens: padded/real "
                  f"{row['padded_per_token_file_order']:.2f} -> {row['padded_per_token_sorted']:.2f}; "
                  f"{row['per_s_file_order']:.0f} -> {row['per_s_sorted']:.0f} texts/s ({row['speedup']:.2f} x)")
    if "fragments" in report:
        print("2. fragments (2,000 rows + 1,000 more; one dense + one BM25 query)")
        for mode, row in report["fragments"].items():
            print(f"   {mode:9s} {row['fragments']:5d} fragments: {row['query_pair_ms']:.0f} ms; optimize "
                  f"{row['optimize_s']:.2f} s; after {row['query_pair_ms_after_optimize']:.0f} ms")
    if "rows" in report:
        r = report["rows"]
        print(f"3. rows to LanceDB ({r['rows']} rows): Python dicts {r['dicts_s']:.2f} s -> Arrow {r['arrow_s']:.2f} s")
    if "front_matter" in report:
        fm = report["front_matter"]
        print(f"4. front matter, CPU ms per typical memory file ({fm['files']} files, median of interleaved runs; "
              f"load average {os.getloadavg()[0]:.1f})")
        for name, row in fm.items():
            if isinstance(row, dict):
                print(f"   {name:45s} read {row['read']:.4f} ms   write {row['write']:.4f} ms")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
