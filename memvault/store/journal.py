"""The write-ahead record of the change under way (`.memvault/change.journal`), so that a change
killed half way (SIGKILL, the OOM killer, a crash, a killed `memvault agent`) leaves the vault with
nothing of it or all of it, committed (docs/design.md, "Commits": "A killed change").

A change (vault.Change) notes each file before it writes or removes it: `new` (the file did not
exist) or `old` with the bytes it had. Once the command has written all it will, `done` records the
commit to make (its message, and HEAD as it was). The record is removed when the change is
indexed and committed. A record found by the next command that holds the vault lock belongs to a
dead process (the lock is the kernel's, released at death), and is settled before anything else:

- without `done`: rolled back. Each noted file is put back as it was, in reverse order (a file the
  change wrote is removed, one it rewrote or moved gets its bytes back), git's staging area is set
  back to HEAD for those paths (a kill inside `git update-index`), and the index takes them in again.
  A rerun of the same `add --jsonl` then stores each text once.
- with `done`: rolled forward. The files are whole (each was written atomically), so the index takes
  them in and the recorded commit is made, unless HEAD moved since `done` (the commit had landed).

Lines are appended with one unbuffered write each (a process killed between two keeps what it
wrote), the line before the file it names, so a last line cut short names a file not touched yet
and is ignored. They are not fsynced one by one: the record guards against the death of the
process; after a power cut the files are whole (fsynced) and a file whose line was lost is read as
a hand edit, as every file was before this record existed.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

NAME = "change.journal"


class Journal:
    """The record of one change, opened at its first file."""

    def __init__(self, root: Path, sidecar: Path, command: str):
        self.root = root
        self.path = sidecar / NAME
        self.command = command
        self._fd: int | None = None

    @property
    def opened(self) -> bool:
        return self._fd is not None

    def _line(self, entry: dict) -> None:
        data = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            head = {"change": self.command, "pid": os.getpid(),
                    "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            data = (json.dumps(head) + "\n").encode() + data
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def before(self, path: Path) -> None:
        """`path` is about to be written or removed: note what it is now."""
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return  # outside the vault: the write refuses it
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            self._line({"new": rel})
        except IsADirectoryError:
            return
        else:
            self._line({"old": rel, "data": base64.b64encode(data).decode("ascii")})

    def done(self, subject: str, message: str, commit: bool, head: str | None, accepted: list[str]) -> None:
        """Everything is written: from here on, the next command finishes the change instead of taking
        it back. Nothing to record when the change wrote no file (a reindex that only commits hand edits:
        those stay hand edits)."""
        if self._fd is not None:
            self._line({"done": True, "commit": commit, "head": head, "subject": subject, "message": message,
                        "accepted": accepted})

    def release(self) -> None:
        """Close the record and leave it for the next command (the change could not be indexed or
        committed: it rolls it forward)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def finish(self) -> None:
        """The change is indexed and committed: the record goes."""
        if self._fd is not None:
            self.release()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


class _Recorded:
    """A commit message as recorded (what gitrepo.commit_paths needs of a CommitRecord)."""

    def __init__(self, subject: str, text: str):
        self.subject, self.text = subject, text

    def message(self) -> str:
        return self.text


def pending(sidecar: Path) -> bool:
    return os.path.exists(sidecar / NAME)


def _read(path: Path) -> tuple[dict, list[dict], dict | None]:
    head: dict = {}
    entries: list[dict] = []
    done = None
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle):
            if not raw.endswith(b"\n"):
                break  # cut short by the kill: the file it names was not touched yet
            try:
                entry = json.loads(raw)
            except ValueError:
                break
            if number == 0:
                head = entry
            elif entry.get("done"):
                done = entry
            else:
                entries.append(entry)
    return head, entries, done


def settle(vault, say: Callable[[str], None] | None = None) -> str | None:
    """Roll back or forward the change a dead process left (the caller holds the vault lock). Returns
    what was done, in words (also said through `say`), or None when there was nothing to settle."""
    from memvault.store import files

    path = vault.sidecar / NAME
    try:
        head, entries, done = _read(path)
    except FileNotFoundError:
        return None
    root = vault.root
    rels = list(dict.fromkeys(e.get("new") or e.get("old") for e in entries if e.get("new") or e.get("old")))
    # the command that was killed, named (not a command to run: no backticks)
    who = f"memvault {head.get('change', 'change')} (pid {head.get('pid', '?')}, killed or crashed)"
    _clear_temp_files(root, rels)
    git = vault.settings.enable_git_versioning and _is_repo(root)
    if done is None:
        removed = restored = 0
        for entry in reversed(entries):
            rel = entry.get("new") or entry.get("old")
            target = root / rel
            try:
                files.ensure_inside(root, target)
            except Exception:  # noqa: BLE001 (a folder made a symlink since: never written through)
                continue
            if "new" in entry:
                try:
                    target.unlink()
                    removed += 1
                except (FileNotFoundError, IsADirectoryError):
                    pass
            else:
                files.atomic_write_bytes(target, base64.b64decode(entry["data"]))
                restored += 1
        if git and rels:
            from memvault.store import gitrepo

            gitrepo.clear_stale_index_lock(root)
            gitrepo.unstage(root, rels)
        _take_in(vault, rels)
        undone = [f"{removed} file(s) it had written removed" if removed else "",
                  f"{restored} put back as they were" if restored else ""]
        said = (f"memvault: took back the change {who} had begun ({', '.join(w for w in undone if w) or 'no file written yet'}): "
                "nothing of it is kept")
    else:
        _take_in(vault, rels, upkeep=True)
        committed = None
        if git and done.get("commit"):
            from memvault.store import gitrepo

            if gitrepo.head_sha(root) == done.get("head"):
                paths = list(dict.fromkeys([*rels, *done.get("accepted", [])]))
                committed = gitrepo.commit_paths(root, _Recorded(done["subject"], done["message"]), paths)
        said = (f"memvault: finished the change {who} had written whole: {done['subject']}"
                + (f" (commit {committed[:8]})" if committed else ""))
    os.unlink(path)
    if say is not None:
        say(said)
    return said


def _is_repo(root: Path) -> bool:
    return os.path.lexists(root / ".git")


def _take_in(vault, rels: list[str], upkeep: bool = False) -> None:
    if not rels or not vault.auto_index:
        return
    report = vault.index.take_in([vault.root / rel for rel in rels], upkeep=upkeep)
    for problem in report.skipped if report is not None else ():
        vault.say(f"memvault: skipped {problem}")


def _clear_temp_files(root: Path, rels: list[str]) -> None:
    """The temp files of atomic writes the kill cut short (`.<name>.<random>.tmp` beside each file)."""
    by_folder: dict[str, set[str]] = {}
    for rel in rels:
        folder, _, name = rel.rpartition("/")
        by_folder.setdefault(folder, set()).add(name)
    for folder, names in by_folder.items():
        try:
            listing = os.listdir(root / folder)
        except OSError:
            continue
        for entry in listing:
            if entry.startswith(".") and entry.endswith(".tmp"):
                name = entry[1:].rsplit(".", 2)[0]
                if name in names:
                    try:
                        os.unlink(root / folder / entry)
                    except OSError:
                        pass
