#!/usr/bin/env python3
"""Cold cost of `import memvault`, `--help`, `search` and `add`, for checkouts side by side (issue 40):
each command in fresh processes, the checkouts interleaved command by command (load hits them alike),
CPU of the child (user + sys) and wall; min and median of RUNS.

    python3 bench/cost_of_faces.py /tmp/before,/tmp/after /tmp/a-vault 10

Each checkout is a folder holding `memvault/` (e.g. `git archive COMMIT memvault | tar -x -C /tmp/before`);
the vault exists (a `memvault add --jsonl` of a few hundred lines), and `add` writes to it. The agent is off."""
import os, resource, statistics, subprocess, sys, time
codes = sys.argv[1].split(","); vault = sys.argv[2]; runs = int(sys.argv[3])
py = sys.executable
cmds = {"import": [py, "-c", "import memvault"], "help": [py, "-m", "memvault", "--help"],
        "search": [py, "-m", "memvault", "search", "what does the user like to eat", "-q"],
        "add": [py, "-m", "memvault", "add", "-q", "--allow-duplicate", "a fact added by the cost bench"]}
res = {(c, k): [] for c in codes for k in cmds}
loads = []
for _ in range(runs):
    for name, cmd in cmds.items():
        for code in codes:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_") and k != "PYTHONDONTWRITEBYTECODE"}
            env.update(PYTHONPATH=code, MEMVAULT_AGENT="off", MEMVAULT_DIR=vault)
            before = resource.getrusage(resource.RUSAGE_CHILDREN); t = time.perf_counter()
            p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wall = time.perf_counter() - t; after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if p.returncode: print(code, name, p.stderr.decode()[-400:]); sys.exit(1)
            res[(code, name)].append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall))
    loads.append(os.getloadavg()[0])
print(f"runs={runs} load1 during: min {min(loads):.1f} median {statistics.median(loads):.1f} max {max(loads):.1f}")
for name in cmds:
    for code in codes:
        cpus = [c for c, _ in res[(code, name)]]; walls = [w for _, w in res[(code, name)]]
        print(f"{name:7} {code:16} cpu min {min(cpus)*1000:6.0f} ms  median {statistics.median(cpus)*1000:6.0f}   wall min {min(walls)*1000:6.0f}  median {statistics.median(walls)*1000:6.0f}")
