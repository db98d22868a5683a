"""Terminal manners, in one place.

- Results go to stdout; notices, warnings, progress and errors go to stderr.
- `-q` silences everything on stderr except errors.
- No colour and no progress bars when the stream is not a terminal or when
  NO_COLOR is set (https://no-color.org: present and not empty).

Deliberately light: only the standard library is imported here, so that the
CLI can import it at start-up without slowing `memvault --help`.
"""

from __future__ import annotations

import os
import sys
from typing import IO

# Set once by the CLI from -q; library code asks `quiet()` rather than taking a flag everywhere.
_QUIET = False


def configure(quiet: bool = False) -> None:
    """Called by the CLI's main callback before any command runs."""
    global _QUIET
    _QUIET = bool(quiet)
    if not progress_allowed():
        # Third-party progress bars (model downloads through huggingface_hub and fastembed) are
        # tqdm bars; tqdm reads TQDM_* defaults when first imported, which has not happened yet.
        # (HF_HUB_DISABLE_PROGRESS_BARS would make fastembed print a warning instead.)
        os.environ.setdefault("TQDM_DISABLE", "1")


def quiet() -> bool:
    return _QUIET


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def is_terminal(stream: IO | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def color_allowed(stream: IO | None = None) -> bool:
    """Colour only on a terminal, never with NO_COLOR."""
    return is_terminal(sys.stdout if stream is None else stream) and not no_color()


def progress_allowed() -> bool:
    """Progress bars only on a stderr terminal, never with -q or NO_COLOR."""
    return not _QUIET and is_terminal(sys.stderr) and not no_color()


def notice(message: str) -> None:
    """A notice or warning on stderr; silenced by -q."""
    if _QUIET or not message:
        return
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()


def error(message: str) -> None:
    """An error line on stderr; never silenced."""
    sys.stderr.write(f"memvault: error: {message}\n")
    sys.stderr.flush()


class progress_bar:
    """A rich progress bar on stderr, only on a terminal, only for long runs; `with progress_bar() as bar:`
    gives a `bar(done, total)` callback, or None where no bar may be shown."""

    def __init__(self, enabled: bool = True, label: str = "embedding", minimum: int = 200):
        self.enabled = enabled and progress_allowed()  # a terminal, no -q, no NO_COLOR
        self.label, self.minimum = label, minimum
        self.progress = None
        self.task = None

    def __enter__(self):
        return self if self.enabled else None

    def __call__(self, done: int, total: int) -> None:
        if total < self.minimum:
            return
        if self.progress is None:
            from rich.progress import Progress

            self.progress = Progress(transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=total)
        self.progress.update(self.task, completed=done)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()
        return False


class stage_progress:
    """Progress bars for a command that works in stages (an import reads, indexes, then learns): one
    rich bar per stage, with its ETA, only on a terminal. `with stage_progress() as progress:` gives
    a `progress(stage, done, total)` callback, or None where no bar may be shown."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled and progress_allowed()
        self.progress = None
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        return self if self.enabled else None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.progress is None:
            from rich.progress import Progress

            self.progress = Progress(transient=True)  # description, bar, percentage, time remaining
            self.progress.start()
        task = self.tasks.get(stage)
        if task is None:
            task = self.tasks[stage] = self.progress.add_task(stage, total=total)
        self.progress.update(task, completed=done, total=total)

    def __exit__(self, *exc):
        if self.progress is not None:
            self.progress.stop()
        return False


def change_lines(rows: list[dict]) -> list[str]:
    """Each change as one line: the action, the id, the text, and what it replaced or was replaced by."""
    lines = []
    for row in rows:
        text = " ".join(row["text"].split())
        if row["event"] == "ADD" and row.get("role") == "pending":
            text += "  (waits for `memvault review`)"
        elif row.get("would_replace"):
            names = ", ".join(i[:8] for i in row["would_replace"])
            text += f"  (would replace {names}, a fact you added: `memvault review` keeps or rejects it)"
        if row["event"] == "UPDATE":
            text += f"  (replaces {row['replaces'][:8]}: {' '.join(row['old_text'].split())})"
        elif row["event"] == "REPLACE":
            text += f"  (replaced by {row['replaced_by'][:8]})"
        elif row.get("reason") and row["event"] == "DELETE":
            text += f"  ({row['reason']})"
        lines.append(f"{row['event']:<7} {row['id']}  {text}")
    return lines
