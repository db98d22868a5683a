#!/usr/bin/env python3
"""Server time per page of the page face (issue 43: <= 150 ms at 10,000 memories, warm).

On an N-memory vault built as bench/perf.py builds it (default 10,000; plus 40 learned facts waiting for
review, a few proposals among them), the serve application (serve.build_app, the same routes and
middleware) answers each page --runs times after one warm-up request, in process (httpx's ASGI client:
no socket, so what is measured is the server). Per page: the server's own time (the `page` figure of
its Server-Timing header: from the page's checks to the rendered HTML, the library call included), the
library call alone (`library`), the wall time of the whole request through the ASGI stack, and the CPU
time of the process and its children (git) over the runs, per request (steadier than wall time on a loaded
machine: there, wall is about CPU times the load per core).

    python bench/page.py                    # 10,000 memories, 20 runs a page
    python bench/page.py --size 1000 --runs 5
    python bench/page.py --vault /tmp/memvault-page/v10000   # reuse a vault built before

Prints a table and writes bench/out/page.json (or --out); `uptime` before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import perf  # noqa: E402


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def seed_review(root: Path) -> None:
    import memvault
    from memvault.store import files

    vault = memvault.open_vault(root)
    mine = vault.recent(limit=10, kinds=["fact"])
    learned = [f"The user learned thing number {n} about their garden" for n in range(36)]
    vault.add(learned, meta={files.ORIGIN_KEY: "learned"})
    for n, old in enumerate(mine[:4]):
        vault.add(f"The user changed their mind, number {n}", meta={files.ORIGIN_KEY: "learned", "would_replace": [old.id]})
    vault.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/memvault-page"))
    ap.add_argument("--vault", type=Path, help="an existing vault (not built)")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "page.json")
    args = ap.parse_args()

    before = uptime()
    print(f"load before: {before}", file=sys.stderr)
    root = args.vault
    if root is None:
        root = args.workdir / f"v{args.size}"
        env = perf.child_env(False)
        perf.prepare_vault(perf.memvault_exe(), env, root, args.size, lambda m: print(m, file=sys.stderr))
        seed_review(root)

    import httpx

    import memvault
    from memvault.faces.serve import ServeOptions, build_app

    vault = memvault.open_vault(root)
    vault.warm()
    some = vault.recent(limit=200)
    cursor = vault.recent(limit=50).next_cursor
    target = some[120]
    conversation = target.conversation_id
    edited = " (edited once, for its history)"
    if not target.text.endswith(edited):  # a vault reused (--vault): its history stays the same length
        vault.edit(target.id, target.text + edited)
    app, _ = build_app(vault, ServeOptions(), lambda message: None)
    pages = {
        "timeline": "/",
        "timeline, page 2": f"/?cursor={cursor}",
        "timeline, filtered": f"/?conversation={conversation}&kinds=fact&since=2020-01-01",
        "search": "/search?query=what+did+we+decide+about+the+database",
        "search, explain": "/search?query=what+did+we+decide+about+the+database&explain=true",
        "one memory": f"/memory/{target.id}",
        "review": "/review",
        "changes": "/changes",
        "conversations": "/conversations",
        "one conversation": f"/conversations/{conversation}",
    }
    import asyncio

    async def measure() -> dict:
        found = {}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for name, path in pages.items():
                warm = await client.get(path)
                assert warm.status_code == 200, (path, warm.status_code, warm.text[:300])
                page_ms, library_ms, wall_ms = [], [], []
                cpu0 = os.times()
                for _ in range(args.runs):
                    began = time.perf_counter()
                    response = await client.get(path)
                    wall_ms.append((time.perf_counter() - began) * 1000)
                    timing = dict(re.findall(r"(\w+);dur=([\d.]+)", response.headers["server-timing"]))
                    page_ms.append(float(timing["page"]))
                    library_ms.append(float(timing["library"]))
                cpu1 = os.times()
                cpu = sum(b - a for a, b in zip(cpu0[:4], cpu1[:4])) * 1000 / args.runs  # git's children too
                found[name] = {"path": path, "bytes": len(response.content),
                               "page_ms_median": statistics.median(page_ms), "page_ms_max": max(page_ms),
                               "page_ms_p90": sorted(page_ms)[int(0.9 * (len(page_ms) - 1))],
                               "library_ms_median": statistics.median(library_ms),
                               "wall_ms_median": statistics.median(wall_ms), "cpu_ms_per_request": cpu}
        return found

    results = asyncio.run(measure())
    after = uptime()
    vault.close()
    print(f"load after: {after}", file=sys.stderr)
    print(f"{'page':22} {'server ms (median / p90 / max)':>32} {'library':>8} {'wall':>7} {'CPU ms':>7} {'KB':>6}")
    for name, r in results.items():
        print(f"{name:22} {r['page_ms_median']:>12.1f} / {r['page_ms_p90']:>6.1f} / {r['page_ms_max']:>6.1f}"
              f" {r['library_ms_median']:>8.1f} {r['wall_ms_median']:>7.1f} {r['cpu_ms_per_request']:>7.1f}"
              f" {r['bytes'] / 1024:>6.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"size": args.size if args.vault is None else None, "vault": str(root),
                                    "runs": args.runs, "load_before": before, "load_after": after,
                                    "pages": results}, indent=2))


if __name__ == "__main__":
    main()
