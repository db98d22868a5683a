"""How a benchmark stops a process it started: the rule of tests/conftest.py's stop_process (which a
script under bench/ cannot import), kept the same here.

    proc = subprocess.Popen(...)
    try:
        ...
    finally:
        stop_process(proc)

SIGTERM, then SIGKILL after `timeout` seconds (with its process group, when the process leads one:
its git children go too). Never SIGINT: a benchmark started from a background job (`nohup`, `&` in a
script, cron) passes its children SIGINT ignored.
"""

from __future__ import annotations

import os
import signal
import subprocess


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> int:
    """Stop proc if it still runs (see above); its exit code."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        leads_group = os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        leads_group = False
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL) if leads_group else proc.kill()
        except ProcessLookupError:
            pass
        return proc.wait(timeout=timeout)
