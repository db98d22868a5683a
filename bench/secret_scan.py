#!/usr/bin/env python3
"""Secrets at the door (issue 31): what memvault's scanner flags in ordinary chat, what it finds in a set of
real-looking secrets, and what it costs.

    python bench/secret_scan.py            # everything (~3 min here, most of it building the push-check vault)
    python bench/secret_scan.py --quick    # smoke: 300 LoCoMo turns, no vault

1. False positives: every turn of the LoCoMo dev conversations (the `content` memvault stores, "Speaker:
   text") and every turn of the memory-upkeep scenarios, plus tests/secret_samples.py's developer talk
   that holds no secret (commit ids, digests, URLs, an assistant's example code: the set the rules were
   tuned on) and, held out, this repository's commit messages and documentation paragraphs. Each flagged text is
   printed with what was found. The same texts through stock detect-secrets (`scan_line` with every
   plugin and its default filters and limits, as `detect-secrets scan --string` runs) for comparison.
   Issue 44's sets: notes with ids, hashes and numbers (`notes_with_ids`, 149; `notes_held_out`, 59, written after
   the rules), sentences about passwords that say none (`password_talk`).
2. Detection: tests/secret_samples.py's ~100 secrets of 24 kinds, each in a sentence: withheld (the value
   gone from the stored text), and named as its kind; the same for stock detect-secrets (found at all).
   Issue 44's passwords as people write them (114, and 20 held out): withheld whole, no tail shown.
3. Cost: `secret_scan.withhold` per stored turn (what `Change._write` adds), per LoCoMo turn and per
   2,000-character text; the first use in a process (importing detect-secrets, building the plugins); a
   cold `memvault search` imports no detect-secrets (`python -X importtime`) and `add` does, with its share.
4. The push check: `scrub.secrets_to_push` of a whole vault's history (a first push), at N LoCoMo turns.

Writes bench/out/secrets.json (or --out) and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
from checkout import git_commit, with_this_checkout  # noqa: E402  (bench/ is on sys.path: the script's folder)

from secret_samples import (heldout_notes, heldout_passwords, innocent_notes, negatives, password_talk,  # noqa: E402
                            prose_passwords, samples)

LOCOMO = Path("/work/shared/bench/locomo/locomo_memories.jsonl")
SCENARIOS = Path("/work/shared/bench/memory/scenarios_dev.jsonl")


def chat_texts(limit: int | None) -> dict[str, list[str]]:
    locomo = [json.loads(line)["content"] for line in LOCOMO.open()]
    scenarios = [turn for line in SCENARIOS.open() for turn in json.loads(line)["turns"]]
    return {"locomo": locomo[:limit] if limit else locomo, "scenarios": scenarios, "developer": negatives(),
            "project_text": project_text(), "notes_with_ids": innocent_notes(), "notes_held_out": heldout_notes(),
            "password_talk": password_talk()}


def project_text() -> list[str]:
    """Technical prose the rules were not tuned on: this repository's commit messages and the paragraphs of
    its README, design notes and bench/README (commands, paths, commit ids, settings, example keys)."""
    log = subprocess.run(["git", "-C", str(REPO), "log", "--format=%B%x00"], capture_output=True, text=True).stdout
    texts = [m.strip() for m in log.split("\0") if m.strip()]
    for name in ("README.md", "docs/design.md", "bench/README.md"):
        texts += [p.strip() for p in (REPO / name).read_text().split("\n\n") if p.strip()]
    return texts


def stock_scan():
    """Stock detect-secrets on one string: every plugin, its default filters and limits, as
    `detect-secrets scan --string` (adhoc: entropy plugins look at unquoted strings too)."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    context = default_settings()
    context.__enter__()

    def scan(text: str) -> list[str]:
        found = []
        for line in text.split("\n"):
            for secret in scan_line(line):
                plugin_limit = _stock_limit(secret.type)
                if plugin_limit is not None and _entropy(secret.type, secret.secret_value) <= plugin_limit:
                    continue  # adhoc scans report entropy candidates below the limit too; the CLI says False
                found.append(secret.type)
        return found

    scan.settings = context  # held: a context manager collected would put the settings back (no plugins)
    return scan


def _stock_limit(secret_type: str) -> float | None:
    return {"Base64 High Entropy String": 4.5, "Hex High Entropy String": 3.0}.get(secret_type)


def _entropy(secret_type: str, value: str) -> float:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString

    plugin = Base64HighEntropyString() if secret_type.startswith("Base64") else HexHighEntropyString()
    return plugin.calculate_shannon_entropy(value)


def false_positives(texts: dict[str, list[str]], stock) -> dict:
    from memvault.store import secret_scan

    report = {}
    for name, items in texts.items():
        ours = [(t, [(f.kind, f.value) for f in secret_scan.scan(t)]) for t in items]
        ours = [(t, f) for t, f in ours if f]
        theirs = [(t, found) for t in items if (found := stock(t))]
        report[name] = {"texts": len(items), "flagged": len(ours), "rate": len(ours) / len(items),
                        "flagged_texts": [{"text": t, "found": f} for t, f in ours],
                        "stock_flagged": len(theirs), "stock_rate": len(theirs) / len(items),
                        "stock_examples": [{"text": t[:160], "found": f} for t, f in theirs[:12]]}
    return report


def detection(stock) -> dict:
    from memvault.store import secret_scan

    kinds: dict[str, dict] = {}
    for sample in samples():
        row = kinds.setdefault(sample.kind, {"samples": 0, "withheld": 0, "named": 0, "stock_found": 0,
                                             "stock_named": 0, "missed": []})
        findings = secret_scan.scan(sample.text)
        stored = secret_scan.redact(sample.text, findings)
        row["samples"] += 1
        withheld = sample.value not in stored and not any(
            part in stored for part in re.split(r"\s+", sample.value) if len(part) >= 8)
        row["withheld"] += withheld
        row["named"] += any(f.kind == sample.kind for f in findings)
        stock_types = stock(sample.text)
        row["stock_found"] += bool(stock_types)  # anything at all, an entropy guess included
        row["stock_named"] += any(_stock_limit(t) is None for t in stock_types)  # by a provider's or keyword plugin
        if not withheld:
            row["missed"].append(sample.text[:120])
    total = sum(r["samples"] for r in kinds.values())
    return {"kinds": kinds, "samples": total, "kinds_count": len(kinds),
            "withheld": sum(r["withheld"] for r in kinds.values()),
            "kinds_all_withheld": sum(r["withheld"] == r["samples"] for r in kinds.values()),
            "stock_kinds_found": sum(r["stock_found"] == r["samples"] for r in kinds.values()),
            "stock_kinds_named": sum(r["stock_named"] == r["samples"] for r in kinds.values())}


def prose(stock) -> dict:
    """Issue 44's passwords as people write them: withheld whole (no part of 4+ characters of it left), and
    shown with no tail; what stock detect-secrets finds of them."""
    from memvault.store import secret_scan

    out = {}
    for name, items in (("prose_passwords", prose_passwords()), ("held_out", heldout_passwords())):
        withheld, tails, stock_found, missed = 0, 0, 0, []
        for sample in items:
            findings = secret_scan.scan(sample.text)
            stored = secret_scan.redact(sample.text, findings)
            whole = sample.value not in stored and not any(
                part in stored for part in re.split(r"[\s]+", sample.value) if len(part) >= 4)
            withheld += whole
            tails += any("…" in f.placeholder for f in findings)
            stock_found += bool(stock(sample.text))
            if not whole:
                missed.append(sample.text)
        out[name] = {"samples": len(items), "withheld": withheld, "rate": withheld / len(items),
                     "tail_shown": tails, "stock_found": stock_found, "missed": missed}
    return out


def cost(texts: list[str]) -> dict:
    from memvault.store import files, secret_scan

    class Settings:
        secret_scan = True

    class Vault:
        settings = Settings()

    vault = Vault()
    secret_scan.scan("warm up")
    per_turn, cpu = [], []  # wall, and CPU time of this thread (the machine is shared: waits are not the scan's)
    for text in texts:
        memory = files.Memory("x", "user", "c", files.utcnow(), text, {"origin": "chat"})
        start, start_cpu = time.perf_counter(), time.thread_time()
        secret_scan.withhold(vault, memory)
        cpu.append((time.thread_time() - start_cpu) * 1000)
        per_turn.append((time.perf_counter() - start) * 1000)
    blocks, block = [], ""
    for text in texts:
        block += text + "\n"
        if len(block) >= 2000:
            blocks.append(block)
            block = ""
    per_block = []
    for text in blocks[:300]:
        start = time.perf_counter()
        secret_scan.scan(text)
        per_block.append((time.perf_counter() - start) * 1000)
    per_turn.sort()
    cpu.sort()
    return {"turns": len(per_turn), "mean_ms": statistics.mean(per_turn), "p50_ms": per_turn[len(per_turn) // 2],
            "p99_ms": per_turn[int(len(per_turn) * 0.99)], "max_ms": per_turn[-1],
            "cpu_mean_ms": statistics.mean(cpu), "cpu_p99_ms": cpu[int(len(cpu) * 0.99)], "cpu_max_ms": cpu[-1],
            "per_2000_chars_mean_ms": statistics.mean(per_block) if per_block else None,
            "first_use_s": first_use()}


def first_use() -> float:
    """Import detect-secrets and build the plugins, in a fresh process (median of 5)."""
    code = ("import time; t = time.perf_counter(); from memvault.store import secret_scan; secret_scan.scan('hello'); "
            "print(time.perf_counter() - t)")
    runs = [float(subprocess.run([sys.executable, "-c", code], env=with_this_checkout(dict(os.environ)),
                                 capture_output=True, text=True, check=True).stdout) for _ in range(5)]
    return statistics.median(runs)


def cold_imports(workdir: Path) -> dict:
    """Whether a cold `search` and `add` import detect-secrets (python -X importtime), and its share of add."""
    vault = workdir / "imports"
    env = with_this_checkout({**os.environ, "MEMVAULT_DIR": str(vault)})
    subprocess.run([sys.executable, "-m", "memvault", "add", "The user keeps bees"], env=env, check=True,
                   capture_output=True)
    out = {}
    for name, args in (("search", ["search", "bees"]), ("add", ["add", "The user sells honey"])):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "memvault", *args], env=env,
                              capture_output=True, text=True, check=True)
        rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
        ours = [(len(r[2]) - len(r[2].lstrip()), int(r[1])) for r in rows if r[2].strip().startswith("detect_secrets")]
        outermost = min((depth for depth, _ in ours), default=0)
        out[name] = {"imports_detect_secrets": bool(ours),  # what the outermost detect_secrets imports took, together
                     "detect_secrets_cumulative_ms": sum(us for depth, us in ours if depth == outermost) / 1000}
    return out


def push_check(workdir: Path, turns: list[str], size: int) -> dict:
    """A vault of `size` LoCoMo turns (one `add --jsonl`), then the check a first push makes: every blob."""
    vault = workdir / "push"
    env = with_this_checkout({**os.environ, "MEMVAULT_DIR": str(vault)})
    lines = "".join(json.dumps({"text": t, "conversation_id": "locomo"}) + "\n" for t in turns[:size])
    subprocess.run([sys.executable, "-m", "memvault", "-q", "add", "--jsonl", "-"], input=lines, text=True, env=env,
                   check=True, capture_output=True)
    code = ("import time, memvault; from memvault.store import gitrepo; from memvault.changing import scrub; v = memvault.open_vault()._vault; "
            "h = gitrepo.head_sha(v.root); t = time.perf_counter(); f = scrub.secrets_to_push(v, h, None); "
            "print(time.perf_counter() - t, len(f))")
    runs = []
    for _ in range(3):
        seconds, found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                        check=True).stdout.split()
        runs.append(float(seconds))
    return {"memories": size, "seconds": statistics.median(runs), "found": int(found)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke: 300 LoCoMo turns, no vault")
    ap.add_argument("--push-size", type=int, default=4000, help="memories in the push-check vault (default 4000)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "memvault-secrets")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    os.environ.update(with_this_checkout({}))
    texts = chat_texts(300 if args.quick else None)
    stock = stock_scan()
    started = time.time()
    report = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
              "machine": f"{platform.machine()} {os.cpu_count()} CPUs", "load_before": os.getloadavg()[0],
              "false_positives": false_positives(texts, stock), "detection": detection(stock),
              "prose_passwords": prose(stock),
              "cost": cost(texts["locomo"])}
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    try:
        report["cold_imports"] = cold_imports(args.workdir)
        if not args.quick:
            report["push_check"] = push_check(args.workdir, texts["locomo"], args.push_size)
    finally:
        shutil.rmtree(args.workdir, ignore_errors=True)
    report["load_after"] = os.getloadavg()[0]
    report["seconds"] = round(time.time() - started, 1)
    out = args.out or HERE / "out" / ("secrets-quick.json" if args.quick else "secrets.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print_report(report)
    print(f"\nwritten to {out}")


def print_report(report: dict) -> None:
    print(f"secrets at the door, {report['date']}, {report['commit']}, load {report['load_before']:.1f} -> "
          f"{report['load_after']:.1f}")
    print("\nfalse positives          texts  memvault flagged      stock detect-secrets flagged")
    for name, row in report["false_positives"].items():
        print(f"  {name:<20} {row['texts']:>7}  {row['flagged']:>4} ({row['rate']:.2%})        "
              f"{row['stock_flagged']:>4} ({row['stock_rate']:.2%})")
        for item in row["flagged_texts"]:
            print(f"      flagged: {item['found']}  in  {item['text'][:120]!r}")
    d = report["detection"]
    print(f"\ndetection: {d['withheld']}/{d['samples']} secrets withheld; {d['kinds_all_withheld']}/{d['kinds_count']} "
          f"kinds withheld every time (stock detect-secrets finds every sample of {d['stock_kinds_found']} kinds, "
          f"{d['stock_kinds_named']} of them by a plugin that names it rather than by entropy)")
    print("  kind                  samples withheld named  stock: found named")
    for kind, row in sorted(d["kinds"].items()):
        print(f"  {kind:<22} {row['samples']:>5} {row['withheld']:>8} {row['named']:>5} {row['stock_found']:>12} "
              f"{row['stock_named']:>5}")
        for missed in row["missed"]:
            print(f"      missed: {missed!r}")
    for name, row in report.get("prose_passwords", {}).items():
        print(f"{name}: {row['withheld']}/{row['samples']} withheld whole ({row['rate']:.1%}), a tail shown for "
              f"{row['tail_shown']}; stock detect-secrets finds {row['stock_found']}")
        for missed in row["missed"]:
            print(f"      missed: {missed!r}")
    c = report["cost"]
    block = f"{c['per_2000_chars_mean_ms']:.2f} ms" if c["per_2000_chars_mean_ms"] is not None else "-"
    print(f"\ncost per stored turn ({c['turns']} LoCoMo turns): wall mean {c['mean_ms']:.3f} ms, p50 {c['p50_ms']:.3f}, "
          f"p99 {c['p99_ms']:.3f}, max {c['max_ms']:.2f}; CPU mean {c['cpu_mean_ms']:.3f} ms, p99 {c['cpu_p99_ms']:.3f}, "
          f"max {c['cpu_max_ms']:.2f}; per 2,000 characters {block}; first use in a process (import + plugins) "
          f"{c['first_use_s'] * 1000:.0f} ms")
    for name, row in report.get("cold_imports", {}).items():
        print(f"cold {name}: imports detect-secrets: {row['imports_detect_secrets']} "
              f"({row['detect_secrets_cumulative_ms']:.0f} ms cumulative)")
    if "push_check" in report:
        p = report["push_check"]
        print(f"push check of a first push, {p['memories']} memories: {p['seconds']:.2f} s ({p['found']} found)")


if __name__ == "__main__":
    main()
