"""Two writers at once (cron plus a shell) must both land."""

import subprocess

from conftest import git
from memvault import files


def test_twenty_parallel_adds_all_land(vault_dir):
    import shutil
    exe = shutil.which("memvault")
    procs = [subprocess.Popen([exe, "add", "-c", f"c{i % 3}", f"parallel memory {i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(20)]
    results = [(p.wait(timeout=600), p.stderr.read().decode()) for p in procs]
    failed = [stderr for code, stderr in results if code != 0]
    assert not failed, failed
    texts = sorted(files.read_memory(p, vault_dir)[0].text for p in files.walk_entries(vault_dir))
    assert texts == sorted(f"parallel memory {i}" for i in range(20))
    assert git(vault_dir, "status", "--porcelain") == ""
    subprocess.run(["git", "-C", str(vault_dir), "fsck", "--strict"], check=True, capture_output=True)
    subjects = git(vault_dir, "log", "--format=%s").splitlines()
    assert len([s for s in subjects if s.startswith("memvault add: 1 memory")]) == 20
