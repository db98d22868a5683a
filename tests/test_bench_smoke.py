"""The benchmarks' smoke modes, so that bench/perf.py, bench/locomo.py and bench/sync.py do not rot.

Not timed tests: they only check that each script runs end to end through the installed
`memvault`, prints its table and writes sane numbers.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "bench" / "locomo"

# Each runs a benchmark end to end (15-20 s of CPU each): `python3 -m pytest -q -m slow -n 2` (.ci/run's second step).
pytestmark = pytest.mark.slow


def run_script(name: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": os.environ["HOME"]}
    done = subprocess.run([sys.executable, str(REPO / "bench" / name), *args], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def run_quick(name: str, tmp_path: Path, workdir: bool = True) -> tuple[str, dict]:
    """bench/NAME --quick, its vaults under tmp_path: (what it printed, its JSON report)."""
    out = tmp_path / f"{Path(name).stem}.json"
    where = ("--workdir", str(tmp_path / "work")) if workdir else ()
    done = run_script(name, "--quick", *where, "--out", str(out), tmp_path=tmp_path)
    return done.stdout, json.loads(out.read_text())


def test_perf_quick(tmp_path):
    stdout, report = run_quick("perf.py", tmp_path)
    assert "cold search (default pipeline)" in stdout and "targets" in stdout
    (size,) = report["sizes"].values()
    for key in ("help", "floor", "search", "add", "reindex_noop", "reindex_edit", "reindex_full", "raw_embed"):
        assert 0 < size[key]["median"] < 120, key
        assert size[key]["min"] <= size[key]["median"] <= size[key]["max"]
    assert 10 < size["rss_mb"]["search"]["median"] < 4000
    assert size["memories"] >= 60
    assert set(size["verdicts"]) == {"search_vs_floor", "reindex_noop_over_floor", "full_reindex_vs_raw",
                                     "add_over_floor", "search_rss_mb", "help_s"}
    assert all(isinstance(v["ok"], bool) for v in size["verdicts"].values())
    assert report["meta"]["commit"] and report["meta"]["machine"]["cpus"] >= 1


@pytest.mark.skipif(not (LOCOMO / "locomo_memories.jsonl").exists(), reason="LoCoMo data not present")
def test_locomo_quick(tmp_path):
    stdout, report = run_quick("locomo.py", tmp_path)
    assert "R@10" in stdout and "hybrid" in stdout and "bm25" in stdout
    assert report["meta"]["questions"] > 0
    assert set(report["configs"]) == {"default", "bm25", "hybrid"}
    for name, config in report["configs"].items():
        for metric in ("recall@5", "recall@10", "mrr"):
            value = config["cat1_4"][metric]
            assert 0.0 <= value <= 1.0 and not math.isnan(value), (name, metric)
        assert config["cat1_4"]["recall@5"] <= config["cat1_4"]["recall@10"] + 1e-9
    # the evidence is findable at all: on 150 turns, BM25 puts some of it in the top 10
    assert report["configs"]["bm25"]["cat1_4"]["recall@10"] > 0.2


def test_import_export_quick(tmp_path):
    stdout, report = run_quick("import_export.py", tmp_path)
    assert "export -> import jsonl -> export byte-identical: True" in stdout
    steps = report["steps"]
    assert steps["import chatgpt"]["added"] == report["meta"]["messages"] == 120
    assert steps["import chatgpt again (all there)"]["already"] == 120
    assert all(0 < step["wall_s"] < 300 and 0 < step["peak_rss_mb"] < 8000 for step in steps.values())


def test_mcp_quick(tmp_path):
    stdout, report = run_quick("mcp.py", tmp_path)
    assert "search_memory, SDK client over stdio" in stdout and "goal p50" in stdout
    for key in ("sdk_latency", "pipe_latency"):
        figures = report[key]
        assert figures["calls"] == 20 and 0 < figures["min"] <= figures["p50"] <= figures["p99"] <= figures["max"]
    assert report["sdk_latency"]["with_results"] == 20
    (start,) = report["start_up"]
    assert 0 < start["initialize_s"] <= start["tools_list_s"] <= start["first_search_s"] < 300
    assert 0 < start["first_search_after_idle_ms"] < 300_000 and start["idle_s"] == 3
    assert report["meta"]["memories"] >= 60 and report["meta"]["versions"]["mcp"].startswith("2.")


def test_serve_quick(tmp_path):
    stdout, report = run_quick("serve.py", tmp_path)
    assert "POST /v1/memories/search, warm" in stdout and "goals:" in stdout
    search, overhead, concurrency, rss = (report[k] for k in ("search", "overhead", "concurrency", "rss"))
    assert search["n"] == 20 and 0 < search["min"] <= search["p50"] <= search["p99"] <= search["max"]
    assert search["with_results"] == 20
    for name in ("direct", "proxy", "direct_stream", "proxy_stream"):
        assert overhead[name]["n"] == 5 and overhead[name]["p50"] > 0, name
    assert concurrency["requests"] == 9 and concurrency["errors"] == 0
    assert concurrency["turns"] == {"user": 9, "assistant": 9, "unanswered": 0, "partial": 0}
    assert concurrency["git_status_clean"] and concurrency["git_fsck_clean"]
    assert 10 < rss["after_10_mb"] < 8000 and 10 < rss["after_30_mb"] < 8000 and rss["exit_code"] == 0
    assert report["stop"]["exit_code"] == 0 and report["meta"]["memories"] >= 60
    ttfb = report["ttfb"]
    assert (ttfb["single"]["chats"], ttfb["many"]["chats"], ttfb["many"]["errors"]) == (4, 9, 0)
    assert 0 < ttfb["single"]["ttfb"]["p50"] and ttfb["ratio_p50"] > 0 and ttfb["exit_code"] == 0
    for part in (ttfb["single"], ttfb["many"]):  # the whole machine's CPU a chat, beside the server's
        cpu = part["cpu_ms_per_chat"]
        assert set(cpu) == {"server_children", "clients", "upstream", "machine_busy"}
        assert min(cpu.values()) >= 0 and cpu["machine_busy"] > 0  # /proc's 10 ms ticks: a small part may read 0
    assert "CPU a chat, one client: server" in stdout
    assert set(report["verdicts"]) >= {"search p50 <= 30 ms", "overhead p50 <= 50 ms", "overhead p99 <= 150 ms",
                                       "0 errors", "RSS growth <= 10%", "ttfb p50, 20 conversations <= 2x one"}


def test_sync_quick(tmp_path):
    stdout, report = run_quick("sync.py", tmp_path)
    assert "of which embedding" in stdout
    (row,) = report["rounds"]
    assert report["n"] == 50
    assert 0 < row["library"]["embedding_s"] < row["library"]["wall_s"] < 300
    assert 0 < row["command"]["wall_s"] < 300 and set(row["command"]["seconds"]) >= {"commit", "fetch", "integrate"}


def test_scale_quick(tmp_path):
    """bench/scale.py at 60 and 200 memories: the issue 20 table with its goal column."""
    stdout, report = run_quick("scale.py", tmp_path, workdir=False)
    for row in ("`log -n 20`", "`show ID-PREFIX`", "`log ID-PREFIX`", "cold `search`", "peak RSS of `search`"):
        assert row in stdout, row
    cells = {row[0]: row for row in ([c.strip() for c in line.strip().strip("|").split("|")]
                                     for line in stdout.splitlines() if line.startswith("| "))}
    # Each goal with a verdict says ok or MISS in the last column (a word anywhere in the output passed before).
    for row in ("cold `search`", "`add` of one memory", "`log -n 20`", "`show ID-PREFIX`", "`log ID-PREFIX`",
                "peak RSS of `search`"):
        assert cells[row][-2] and cells[row][-1] in ("ok", "MISS"), cells[row]
    assert set(report["sizes"]) == {"60", "200"}
    for size in report["sizes"].values():
        for key in ("search", "add", "reindex_noop", "reindex_edit", "log_n20", "show_id", "log_id"):
            assert 0 < size[key]["wall"]["median"] < 120 and 0 < size[key]["cpu"]["median"] < 120, key
        assert 0 < size["built"]["seconds"] and 10 < size["built"]["rss_mb"] < 4000


@pytest.mark.skipif(not (LOCOMO / "locomo_memories.jsonl").exists(), reason="LoCoMo data not on this machine")
def test_secret_scan_quick(tmp_path):
    stdout, report = run_quick("secret_scan.py", tmp_path)
    assert "false positives" in stdout and "cost per stored turn" in stdout
    assert report["false_positives"]["locomo"]["texts"] == 300
    detection = report["detection"]
    assert detection["kinds_count"] >= 15 and detection["samples"] >= 60
    assert detection["kinds_all_withheld"] == detection["kinds_count"]
    prose = report["prose_passwords"]["prose_passwords"]
    assert prose["samples"] >= 100 and prose["withheld"] == prose["samples"] and prose["tail_shown"] == 0
    notes = report["false_positives"]["notes_with_ids"]
    assert notes["texts"] >= 100 and notes["flagged"] * 50 <= notes["texts"]
    assert 0 < report["cost"]["cpu_mean_ms"] < 50
    assert report["cold_imports"]["search"]["imports_detect_secrets"] is False
    assert report["cold_imports"]["add"]["imports_detect_secrets"] is True
