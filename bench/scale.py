#!/usr/bin/env python3
"""Scale: the commands of a 10,000- and a 100,000-memory vault side by side (issue 20).

The vaults are built once with `memvault add --jsonl` of a bench/synth.py file (the build's time
and peak memory are that command's figures) and kept in --vaults (default
/work/bench-vaults, outside git) for later runs: at 100,000 memories a build is an hour of
embedding on a loaded 2-core machine. Every measurement is a fresh process, with its wall time,
its CPU time (user + system, its git children included: wait4) and its peak RSS; rounds of the
two sizes alternate, so the load of the moment hits both alike. The ratio column is
largest / smallest size, on wall and on CPU time; the goal column is issue 20's.

    python bench/scale.py                          # 10,000 and 100,000, 3 rounds (builds what is missing)
    python bench/scale.py --sizes 2000,20000 --runs 5
    python bench/scale.py --full-runs 1            # also reindex --full against raw fastembed (slow)
    python bench/scale.py --build-only --vaults /work/bench-vaults/new   # only the add --jsonl figures
    python bench/scale.py --quick                  # smoke: 60 and 200 memories in a temp folder
    python bench/scale.py --code /work/main        # another checkout's memvault (a before/after)
    python bench/scale.py --table bench/out/scale.json
    python bench/scale.py --runs 9 --stat min      # the minimum of 9 interleaved runs (steadier under load)

The measurements change the vaults a little (each round adds a memory and edits one by hand);
nothing else. A vault an older memvault built keeps working (its state.json is carried over).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import perf  # noqa: E402
import synth  # noqa: E402
from checkout import git_commit  # noqa: E402

DEFAULT_VAULTS = Path("/work/bench-vaults")

# (key, label, goal text, check(ratio_or_value, result) -> bool); "abs" goals look at every size.
COMMANDS = [
    ("search", "cold `search`", "<= 1.2x", "ratio", 1.2),
    ("add", "`add` of one memory", "<= 1.2x", "ratio", 1.2),
    ("reindex_noop", "`reindex`, nothing changed", "<= 1.5x", "ratio", 1.5),
    ("reindex_edit", "`reindex` after a hand edit in place", "", None, None),
    ("log_n20", "`log -n 20`", "< 1 s at each size", "abs", 1.0),
    ("show_id", "`show ID-PREFIX`", "< 1 s at each size", "abs", 1.0),
    ("log_id", "`log ID-PREFIX`", "< 1 s at each size", "abs", 1.0),
]


def build(mv, env, vaults: Path, n: int, log) -> dict:
    """The vault of n memories, built once: its add --jsonl figures are kept beside it."""
    root = vaults / f"vault-{n}"
    record = vaults / f"vault-{n}.build.json"
    if root.is_dir() and record.exists():
        return json.loads(record.read_text(encoding="utf-8"))
    log(f"[{n:,}] building {root} with add --jsonl (kept for later runs) ...")
    load = os.getloadavg()[0]
    built = perf.build_vault(mv, env, root, n)
    built.update(load=[load, os.getloadavg()[0]], date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 commit=git_commit())
    record.write_text(json.dumps(built, indent=1), encoding="utf-8")
    log(f"[{n:,}] built in {built['seconds']:.0f} s, peak RSS {built['rss_mb']:.0f} MB")
    return built


class Size:
    def __init__(self, n: int, root: Path, mv, env, log):
        self.n, self.root, self.mv, self.env, self.log = n, root, mv, env, log
        self.vault = ["--vault", str(root)]
        self.samples: dict[str, list[dict]] = {key: [] for key, *_ in COMMANDS}
        self.full: list[dict] = []
        self.raw: list[dict] = []

    def measure(self, key: str, argv: list[str], check=None) -> perf.Child:
        load = os.getloadavg()[0]
        child = perf.run([*self.mv, *argv], self.env)
        if check is not None and not check(child):
            raise SystemExit(f"[{self.n}] {key}: unexpected output: {child.stdout[:500]} {child.stderr[:500]}")
        self.samples[key].append({"wall": child.wall, "cpu": child.cpu, "rss_mb": child.rss_mb, "load": load})
        return child

    def some_id(self, r: int) -> str:
        facts = sorted(os.listdir(self.root / "entries" / "global" / "facts"))
        name = facts[(r * 7919 + 17) % len(facts)]
        return name.rsplit("__", 1)[1][:-3]

    def round(self, r: int, only: set[str] | None = None) -> None:
        def wanted(key: str) -> bool:
            return only is None or key in only

        conversation, query = synth.QUERIES[r % len(synth.QUERIES)]
        if wanted("search"):
            self.measure("search", [*self.vault, "-q", "search", "-c", conversation, query],
                         lambda c: c.stdout.strip() != "")
        if wanted("add"):
            self.measure("add", ["-q", *self.vault, "add",
                                 f"Dana noted scale memory number {r} on {synth.WEEKDAYS[r % 7]}."])
        if wanted("reindex_noop"):
            self.measure("reindex_noop", ["-q", *self.vault, "reindex", "--json"],
                         lambda c: not json.loads(c.stdout)["added"] and not json.loads(c.stdout)["changed"])
        if wanted("reindex_edit"):
            perf.edit_one_file(self.root, r + 1000 * self.n)  # appended in place: same inode
            self.measure("reindex_edit", ["-q", *self.vault, "reindex", "--json"],
                         lambda c: len(json.loads(c.stdout)["changed"]) == 1)
        if wanted("log_n20"):
            self.measure("log_n20", [*self.vault, "log", "-n", "20"], lambda c: c.stdout.count("\n") >= 20)
        prefix = self.some_id(r)[:8]
        if wanted("show_id"):
            self.measure("show_id", [*self.vault, "show", prefix], lambda c: prefix in c.stdout)
        if wanted("log_id"):
            self.measure("log_id", [*self.vault, "log", prefix], lambda c: prefix in c.stdout)
        self.log(f"[{self.n:,}] round {r + 1}: " + ", ".join(
            f"{k} {v[-1]['wall']:.2f}s/{v[-1]['cpu']:.2f}cpu" for k, v in self.samples.items() if v))

    def full_round(self, jsonl: str) -> None:
        c = perf.run([sys.executable, "-c", perf.RAW_EMBED, jsonl], self.env)
        self.raw.append({**json.loads(c.stdout), "load": os.getloadavg()[0]})
        load = os.getloadavg()[0]
        c = perf.run([*self.mv, "-q", *self.vault, "reindex", "--full", "--json"], self.env)
        self.full.append({"wall": c.wall, "cpu": c.cpu, "rss_mb": c.rss_mb, "load": load,
                          "memories": len(json.loads(c.stdout)["added"])})
        self.log(f"[{self.n:,}] reindex --full {c.wall:.0f} s ({self.full[-1]['memories'] / c.wall:.0f}/s), "
                 f"raw fastembed {self.raw[-1]['n'] / self.raw[-1]['seconds']:.0f}/s")

    def disk(self) -> dict:
        def size(path: Path) -> int:
            return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())

        return {"sidecar_mb": size(self.root / ".memvault") / 1e6, "git_mb": size(self.root / ".git") / 1e6}

    def result(self, built: dict) -> dict:
        out = {"built": built, "disk": self.disk()}
        for key, samples in self.samples.items():
            if not samples:
                continue
            out[key] = {field: perf.stats([s[field] for s in samples]) for field in ("wall", "cpu", "rss_mb", "load")}
        if self.full:
            per_s = [f["memories"] / f["wall"] for f in self.full]
            raw = [r["n"] / r["seconds"] for r in self.raw]
            out["full"] = {"per_s": perf.stats(per_s), "raw_per_s": perf.stats(raw),
                           "vs_raw": perf.stats([a / b for a, b in zip(per_s, raw)]),
                           "rss_mb": perf.stats([f["rss_mb"] for f in self.full]), "runs": self.full, "raw": self.raw}
        return out


# -- the table -------------------------------------------------------------------------------
def table(report: dict, stat: str = "median") -> str:
    """stat: each command's median or minimum over the rounds (the minimum of interleaved runs is what
    the load of the moment moves least)."""
    sizes = sorted(report["sizes"], key=int)
    small, big = report["sizes"][sizes[0]], report["sizes"][sizes[-1]]
    head = [f"command ({stat}; wall / CPU)", *[f"{int(s):,}" for s in sizes], "ratio wall / CPU", "goal", ""]
    rows = [head]

    def cell(r, key):
        m = r[key]
        return f"{m['wall'][stat]:.2f} s / {m['cpu'][stat]:.2f} s"

    built = [report["sizes"][s]["built"] for s in sizes]
    rows.append(["`add --jsonl` of the whole vault (build)",
                 *[f"{b['seconds']:.0f} s, {b['rss_mb']:.0f} MB" for b in built],
                 f"{built[-1]['seconds'] / built[0]['seconds']:.1f}x time, {built[-1]['rss_mb'] / built[0]['rss_mb']:.1f}x"
                 " memory", "<= 800 MB at 100,000",
                 verdict(built[-1]["rss_mb"] <= 800) if int(sizes[-1]) >= 100_000 else ""])
    for key, label, goal, kind, limit in COMMANDS:
        if key not in big or key not in small:
            continue  # not measured (--only)
        wall = big[key]["wall"][stat] / small[key]["wall"][stat]
        cpu = big[key]["cpu"][stat] / small[key]["cpu"][stat]
        if kind == "ratio":
            ok = verdict(min(wall, cpu) <= limit)
        elif kind == "abs":
            ok = verdict(all(report["sizes"][s][key]["wall"][stat] < limit for s in sizes))
        else:
            ok = ""
        rows.append([label, *[cell(report["sizes"][s], key) for s in sizes], f"{wall:.2f}x / {cpu:.2f}x", goal, ok])
    if "search" in big and "search" in small:
        rows.append(["peak RSS of `search`", *[f"{report['sizes'][s]['search']['rss_mb']['median']:.0f} MB" for s in sizes],
                     f"{big['search']['rss_mb']['median'] / small['search']['rss_mb']['median']:.2f}x", "<= 600 MB",
                     verdict(big["search"]["rss_mb"]["median"] <= 600)])
    if all("full" in report["sizes"][s] for s in sizes):
        rows.append(["`reindex --full` throughput vs raw fastembed",
                     *[f"{report['sizes'][s]['full']['per_s']['median']:.0f}/s vs "
                       f"{report['sizes'][s]['full']['raw_per_s']['median']:.0f}/s = "
                       f"{report['sizes'][s]['full']['vs_raw']['median']:.2f}x" for s in sizes],
                     "", ">= 0.8x at 100,000", verdict(big["full"]["vs_raw"]["median"] >= 0.8)])
    rows.append(["on disk: `.memvault`, `.git`",
                 *[f"{report['sizes'][s]['disk']['sidecar_mb']:.0f} MB, {report['sizes'][s]['disk']['git_mb']:.0f} MB"
                   for s in sizes], "", "", ""])
    first = next(key for key, *_ in COMMANDS if key in big)
    loads = [report["sizes"][s][first]["load"]["median"] for s in sizes]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    meta = report["meta"]
    lines.append("")
    lines.append(f"{meta['date']}, commit {meta['commit']}, code {meta['code']}, {meta['runs']} rounds "
                 f"(interleaved, {stat} of each); load average "
                 f"(1 min) during the {first} runs: median {', '.join(f'{x:.1f}' for x in loads)}; "
                 f"at start {meta['machine'].get('loadavg_at_start', ['?'])[0]:.1f}. A ratio goal passes on wall or "
                 "CPU time (the load stretches wall time unevenly).")
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISS"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="vault sizes, comma-separated (default 10000,100000)")
    ap.add_argument("--runs", type=int, default=3, help="rounds per size (default 3)")
    ap.add_argument("--full-runs", type=int, default=0, help="rounds of reindex --full vs raw fastembed (default 0: "
                                                              "an hour at 100,000 here)")
    ap.add_argument("--vaults", type=Path, default=DEFAULT_VAULTS, help="where the vaults are built and kept")
    ap.add_argument("--code", type=Path, default=None, help="the checkout whose memvault runs (default this one)")
    ap.add_argument("--build-only", action="store_true", help="build the missing vaults (their add --jsonl figures), "
                                                                 "measure nothing else")
    ap.add_argument("--quick", action="store_true", help="smoke: 60 and 200 memories in a temp folder, 1 round")
    ap.add_argument("--out", type=Path, default=None, help="JSON report (default bench/out/scale[-quick].json)")
    ap.add_argument("--table", type=Path, metavar="JSON", help="only print the table of an earlier report")
    ap.add_argument("--only", default=None, metavar="KEYS",
                    help="measure only these commands, comma-separated: " + ", ".join(k for k, *_ in COMMANDS))
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="the table's figure per command: median (default) or minimum of the rounds")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text(encoding="utf-8")), args.stat))
        return 0
    sizes = [60, 200] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    runs = 1 if args.quick else args.runs
    vaults = Path(tempfile.mkdtemp(prefix="memvault-scale-")) if args.quick else args.vaults
    vaults.mkdir(parents=True, exist_ok=True)
    out = args.out or HERE / "out" / ("scale-quick.json" if args.quick else "scale.json")
    mv = perf.memvault_exe()
    env = perf.child_env(False)
    if args.code is not None:
        env["PYTHONPATH"] = str(args.code.resolve())

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    report = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       "commit": git_commit() if args.code is None else _commit_of(args.code),
                       "code": str(args.code or perf.HERE.parent), "machine": perf.machine(),
                       "versions": perf.versions(), "runs": runs, "full_runs": args.full_runs}, "sizes": {}}
    try:
        built = {n: build(mv, env, vaults, n, log) for n in sizes}
        if args.build_only:
            print(json.dumps(built, indent=1))
            return 0
        benches = [Size(n, vaults / f"vault-{n}", mv, env, log) for n in sizes]
        for bench in benches:  # warm: page cache, .pyc files, a record carried over (not measured)
            perf.run([*mv, *bench.vault, "-q", "search", "warm up"], env)
        only = {k.strip() for k in args.only.split(",")} if args.only else None
        for r in range(runs):
            for bench in benches:
                bench.round(r, only)
        for _ in range(args.full_runs):
            for bench in benches:
                bench.full_round(built[bench.n]["jsonl"])
        for bench in benches:
            report["sizes"][str(bench.n)] = bench.result(built[bench.n])
    finally:
        if args.quick:
            shutil.rmtree(vaults, ignore_errors=True)
    report["meta"]["machine"]["loadavg_at_end"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(table(report, args.stat))
    print(f"\nwrote {out}")
    return 0


def _commit_of(code: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
