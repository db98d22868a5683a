"""The suite's own check that it leaves nothing running (tests/conftest.py, leftover_processes): a
session that leaves a process behind fails, names the test, and stops the process."""

import os
import subprocess
import sys
import time

import pytest

from conftest import REPO, _proc_table

LEAVING = '''
import subprocess, sys, time
from pathlib import Path

from conftest import stop_process

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]
PIDS = Path(__file__).with_name("pids")


def test_leaves_a_child_running():
    PIDS.open("a").write(f"{subprocess.Popen(SLEEP).pid}\\n")


def test_leaves_an_orphan_running():
    # Its parent exits at once: the sleeper is nobody's descendant any more, found by its mark.
    start = f"import subprocess; print(subprocess.Popen({SLEEP!r}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    out = subprocess.run([sys.executable, "-c", start], capture_output=True, text=True, check=True).stdout
    PIDS.open("a").write(out)


def test_stops_what_it_starts():
    proc = subprocess.Popen(SLEEP)
    try:
        time.sleep(0.1)
    finally:
        stop_process(proc)
'''


def _running(pid: int) -> bool:
    entry = _proc_table().get(pid)
    return entry is not None and entry[1] not in "ZX"


@pytest.mark.slow  # end to end: a whole pytest session in a child process, whose leftovers are stopped after their timeout (~43 s here)
def test_a_session_that_leaves_processes_running_fails_naming_the_test_and_stops_them(tmp_path):
    (tmp_path / "test_leaving.py").write_text(LEAVING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_leaving.py")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=100)
    pids = [int(line) for line in (tmp_path / "pids").read_text().split()]
    assert done.returncode == 1, done.stdout + done.stderr
    assert "3 passed, 1 error" in done.stdout, done.stdout
    report = done.stdout[done.stdout.index("at the end of the session"):]
    assert report.startswith("at the end of the session, 2 process(es) the suite started were still running "
                             "(stopped now), each with the test after which it was first seen:\n"), report
    for pid, test in zip(pids, ["test_leaves_a_child_running", "test_leaves_an_orphan_running"]):
        assert f"pid {pid} `{sys.executable} -c import time; time.sleep(120)`, first seen after test " \
               f"test_leaving.py::{test}" in report, report
    assert "first seen after test test_leaving.py::test_stops_what_it_starts" not in report
    deadline = time.monotonic() + 10
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(pid) for pid in pids), "the stragglers were not stopped"
