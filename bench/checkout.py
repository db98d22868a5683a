"""What the benchmark scripts share about the checkout they live in."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def with_this_checkout(env: dict[str, str]) -> dict[str, str]:
    """`env` with this checkout first on PYTHONPATH: children run this checkout's memvault,
    whatever checkout `pip install -e` points at right now."""
    return {**env, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])}


def git_commit() -> str:
    """The checkout's short commit, "+dirty" when memvault/ has uncommitted changes."""
    try:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "memvault"],
                               capture_output=True, text=True).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
