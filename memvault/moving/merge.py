"""Another machine's commits brought into the vault (`sync`): a three-way merge with memvault's own
rules for what git would leave in conflict (docs/design.md, "One vault on several machines").

The merge is made without touching the working tree or the repository's index, so no conflict
marker is ever written into a file (nor read by the index), and a kill at any moment leaves the
vault as it was:

1. `git read-tree -m --aggressive` of base, ours and theirs into a temporary index file under
   .git/ (GitPython's `IndexFile.from_tree` would move the real index aside while it runs, and a
   kill then would leave the vault without one);
2. what stays unmerged is settled path by path (`_settle`), on GitPython's `IndexFile` of that
   temporary index; new files (the losing side of a conflict, kept as a tombstone) are stored
   with `repo.odb`;
3. `IndexFile.write_tree` writes the tree, `git commit-tree` the merge commit (message on stdin,
   with a `Memvault-Resolved:` trailer per conflict).

Each rule gives the same result whichever side runs it (the winner is the later commit, then
the greater blob id; new ids and times come from the content), so two machines that merge the
same two histories at once make the same tree, and their two merges merge cleanly.

`checkout` then brings the files from the old commit to the new one: a journal in .memvault/
first, each file written atomically, the index updated, the branch moved last (compare and swap);
`resume` finishes a checkout a kill interrupted, before anything else touches the files.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from io import BytesIO
from pathlib import Path, PurePosixPath

from memvault.store import files, gitrepo
from memvault.errors import MemoryFileError, MemvaultError, SyncConflict

JOURNAL = "sync-journal.json"  # under .memvault/
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# Ids of the tombstones a merge makes for the losing side of a conflict: from the memory's id and
# the losing content, so both machines name them alike.
SYNC_NAMESPACE = uuid.UUID("c0b7a9e2-4f3d-4a51-9a7e-1d2f6b3e8a47")
# Front-matter key of such a tombstone: why it exists, in words.
SYNC_CONFLICT = "sync_conflict"
_ZERO = "0" * 40


@dataclass
class Resolution:
    """One conflict a sync settled: which path, what had happened on each side, what was kept."""

    path: str
    case: str  # "edited on both sides", "deleted on one side, edited on the other", "generated file", "tombstone"
    kept: str  # "ours" or "theirs": whose version is now at `path` (or whose deletion)
    id: str | None = None  # the memory's id, when the file is a memory
    sibling: str | None = None  # where the other version went (a tombstone), if it was kept
    commit: str | None = None  # the newest commit of the side kept that changed the file

    def to_json(self) -> dict:
        return {"path": self.path, "case": self.case, "kept": self.kept, "id": self.id, "sibling": self.sibling,
                "commit": self.commit}

    def trailer(self) -> str:
        """`Memvault-Resolved: <id>: <case>: kept <whose> (<path> as of <commit>)[; the other is the
        tombstone <path>]`: `log` reads the memory's path and the commit whose version stands from it
        (history._RESOLVED), the same words on every machine."""
        what = {"ours": "kept the version made here", "theirs": "kept the remote's version"}[self.kept]
        if self.id:
            what += f" ({self.path}" + (f" as of {self.commit[:12]})" if self.commit else ")")
        other = f"; the other is the tombstone {self.sibling}" if self.sibling else ""
        return f"Memvault-Resolved: {self.id or self.path}: {self.case}: {what}{other}"


@dataclass
class Merged:
    commit: str
    resolved: list[Resolution]


# -- the merge ---------------------------------------------------------------------------------

def merge(root: Path, ours: str, theirs: str, subject: str, theirs_name: str = "the remote branch") -> Merged:
    """The merge commit of `ours` (HEAD) and `theirs` (the remote's, `theirs_name`: origin/main),
    conflicts settled; nothing outside .git/ is touched. SyncConflict for what no rule settles."""
    git = gitrepo.git_module()
    repo = gitrepo.repo(root)
    try:
        bases = repo.merge_base(ours, theirs)
        base = bases[0].hexsha if bases else EMPTY_TREE  # two vaults started apart: a union
        temp = Path(repo.git_dir) / "memvault-sync-index"
        temp.unlink(missing_ok=True)
        try:
            repo.git.read_tree("-m", "-i", "--aggressive", base, ours, theirs, env={"GIT_INDEX_FILE": str(temp)})
            index = git.IndexFile(repo, str(temp))
            unmerged = index.unmerged_blobs()
            resolved: list[Resolution] = []
            if unmerged:
                times = _newest_change(repo, base, ours, theirs, sorted(unmerged))
                for path in sorted(unmerged):
                    stages = {stage: blob for stage, blob in unmerged[path]}
                    resolved.append(_settle(repo, index, root, str(path), stages, times, theirs_name))
            tree = index.write_tree()
        finally:
            temp.unlink(missing_ok=True)
        message = subject + ("\n\n" + "\n".join(r.trailer() for r in resolved) if resolved else "") + "\n"
        sha = gitrepo.commit_tree(root, tree.hexsha, [ours, theirs], message)
        return Merged(sha, resolved)
    finally:
        repo.close()


def _newest_change(repo, base: str, ours: str, theirs: str, paths: list[str]) -> dict[tuple[str, str], tuple]:
    """{(side, path): (commit time, commit)} of the newest commit since the base that touched each path,
    per side: who edited last."""
    found: dict[tuple[str, str], tuple] = {}
    for side, tip in (("ours", ours), ("theirs", theirs)):
        span = tip if base == EMPTY_TREE else f"{base}..{tip}"
        out = repo.git.log("--format=%x1e%ct %H", "--name-only", "-z", "--no-renames", span, "--", *paths)
        for record in out.split("\x1e")[1:]:
            head, _, names = record.partition("\n")
            stamp, sha = head.split()
            for name in names.split("\0"):
                name = name.strip("\n")
                if name and (side, name) not in found:
                    found[(side, name)] = (int(stamp), sha)
    return found


def _kind(path: str) -> str:
    """memory (a live memory file), tombstone, generated (summaries, session state), or other."""
    parts = PurePosixPath(path).parts
    if len(parts) < 3 or parts[0] != files.ENTRIES or not path.endswith(".md"):
        return "other"
    deleted = parts[2] == files.DELETED
    sub = parts[3:] if deleted else parts[2:]
    if sub and sub[0] == "summaries":
        return "generated"
    return "tombstone" if deleted else "memory"


def _settle(repo, index, root: Path, path: str, stages: dict, times: dict, theirs_name: str) -> Resolution:
    """Settle one unmerged path in `index` (stages: 1 base, 2 ours, 3 theirs; a missing stage is a
    side that deleted the file) and say what was done."""
    ours, theirs = stages.get(2), stages.get(3)
    kind = _kind(path)

    def later() -> str:
        """The side whose change is newer; equal times: the greater blob id (a deletion is the least)."""
        key = {side: (times.get((side, path), (0, ""))[0], blob.hexsha if blob is not None else "")
               for side, blob in (("ours", ours), ("theirs", theirs))}
        return "ours" if key["ours"] > key["theirs"] else "theirs"

    def kept_commit(side: str) -> str | None:
        return times.get((side, path), (0, None))[1] or None

    if kind == "other":
        return _settle_other(repo, index, root, path, stages, theirs_name)
    if kind in ("generated", "tombstone"):
        # A summary or session file is rebuilt from the memories, and a tombstone against a tombstone
        # is the same memory deleted on both sides: the newer version stands, the other stays in history.
        side = later()
        _put(index, path, ours if side == "ours" else theirs)
        case = "generated file" if kind == "generated" else "deleted on both sides"
        return Resolution(path, case, side, _id_of(ours or theirs, root, path), commit=kept_commit(side))
    if ours is not None and theirs is not None:
        side = later()
        winner, loser = (ours, theirs) if side == "ours" else (theirs, ours)
        _put(index, path, winner)
        if _same_edit(ours, theirs, root, path):  # nothing was lost: no tombstone of the other
            return Resolution(path, "the same edit on both sides", side, _id_of(winner, root, path),
                              commit=kept_commit(side))
        stamp, sha = times.get((side, path), (0, ""))
        note = (f"edited on two machines before a sync; this version lost to the later edit"
                f"{f' (commit {sha[:12]})' if sha else ''}")
        sibling = _keep_as_tombstone(repo, index, root, path, loser, note, stamp)
        return Resolution(path, "edited on both sides", side, _id_of(winner, root, path), sibling, kept_commit(side))
    # Deleted on one side, edited on the other: the edit stands; the deletion's tombstone, if the
    # deleting side left one, is kept under a new id, replaced by the edited memory.
    side = "ours" if ours is not None else "theirs"
    kept = ours if ours is not None else theirs
    _put(index, path, kept)
    tombstone_path = PurePosixPath(files.ENTRIES, *PurePosixPath(path).parts[1:2], files.DELETED,
                                   *PurePosixPath(path).parts[2:]).as_posix()
    sibling = None
    entry = index.entries.get((tombstone_path, 0))
    if entry is not None:
        del index.entries[(tombstone_path, 0)]
        note = "deleted on one machine and edited on another before a sync; the edit was kept"
        stamp = times.get(("ours" if side == "theirs" else "theirs", path), (0, ""))[0]
        blob = repo.odb.stream(entry.binsha).read()
        sibling = _keep_as_tombstone(repo, index, root, tombstone_path, _Raw(entry.binsha, entry.mode, blob), note,
                                     stamp)
    return Resolution(path, "deleted on one side, edited on the other", side, _id_of(kept, root, path), sibling,
                      kept_commit(side))


def _settle_other(repo, index, root: Path, path: str, stages: dict, theirs_name: str) -> Resolution:
    """A file outside the memories (memvault.toml, .gitignore, the user's own): git's line merge if
    it merges cleanly, else the sync stops and says so."""
    base, ours, theirs = stages.get(1), stages.get(2), stages.get(3)
    if ours is not None and theirs is not None:
        merged = _line_merge(repo, root, base, ours, theirs)
        if merged is not None:
            _put(index, path, _store(repo, merged, ours.mode))
            return Resolution(path, "changed on both sides, merged line by line", "ours")
    raise SyncConflict(
        f"{path} was changed both here and on the remote and git cannot merge the two; nothing was changed "
        f"here: merge it by hand (`git -C {root} merge {theirs_name}`, fix {path}, commit), then run "
        "memvault sync again")


def _line_merge(repo, root: Path, base, ours, theirs) -> bytes | None:
    """`git merge-file` of the three versions; None when the changes overlap."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=repo.git_dir, prefix="memvault-merge-") as folder:
        names = []
        for label, blob in (("ours", ours), ("base", base), ("theirs", theirs)):
            name = os.path.join(folder, label)
            with open(name, "wb") as handle:
                handle.write(blob.data_stream.read() if blob is not None else b"")
            names.append(name)
        status, out, _ = gitrepo._run(root, "merge-file", "-p", *names)
    return out if status == 0 else None


def _same_edit(ours, theirs, root: Path, path: str) -> bool:
    """Both sides made the same edit: the same text and front matter but for when it was made."""
    memories = []
    for blob in (ours, theirs):
        try:
            memory = files.parse_memory(_data(blob).decode("utf-8"), root / path, root=root)[0]
        except (MemoryFileError, UnicodeDecodeError):
            return False
        memories.append((memory.text, {k: v for k, v in memory.front_matter().items() if k != "updated_at"}))
    return memories[0] == memories[1]


class _Raw:
    """A blob read already (what _keep_as_tombstone needs of a GitPython Blob)."""

    def __init__(self, binsha: bytes, mode: int, data: bytes):
        self.binsha, self.mode, self.data = binsha, mode, data
        self.hexsha = binsha.hex()


def _data(blob) -> bytes:
    return blob.data if isinstance(blob, _Raw) else blob.data_stream.read()


def _id_of(blob, root: Path, path: str) -> str | None:
    if blob is None:
        return None
    try:
        return files.parse_memory(_data(blob).decode("utf-8"), root / path, root=root)[0].id
    except (MemoryFileError, UnicodeDecodeError):
        return None


def _keep_as_tombstone(repo, index, root: Path, path: str, blob, note: str, stamp: int) -> str:
    """Keep a version that lost a conflict as a tombstone of its own under deleted/: a new id (from
    the memory's id and this content), `replaced_by` the memory that stands, `sync_conflict` saying
    why. A file that does not parse is kept as it is, beside the tombstones. Returns its path."""
    data = _data(blob)
    try:
        memory, _ = files.parse_memory(data.decode("utf-8"), root / path, root=root)
    except (MemoryFileError, UnicodeDecodeError):
        rel_path = PurePosixPath(path)
        target = rel_path if files.is_deleted_path(rel_path) else PurePosixPath(
            files.deleted_path_for(root, root / path).relative_to(root).as_posix())
        rel = target.with_name(f"{target.stem}.conflict-{blob.hexsha[:12]}.md").as_posix()
        _put(index, rel, _store(repo, data, blob.mode))
        return rel
    original = memory.id
    memory.id = str(uuid.uuid5(SYNC_NAMESPACE, f"{original}\n{blob.hexsha}"))
    when = datetime.fromtimestamp(stamp, timezone.utc) if stamp else memory.created_at
    memory.extra.setdefault("deleted_at", files.format_time(when))
    memory.extra.setdefault("deleted_reason", "update")
    memory.extra.setdefault("replaced_by", original)
    memory.extra[SYNC_CONFLICT] = note
    live = root / files.relative_path_for(memory)
    rel = files.deleted_path_for(root, live).relative_to(root).as_posix()
    _put(index, rel, _store(repo, files.render(memory).encode("utf-8"), blob.mode))
    return rel


def _store(repo, data: bytes, mode: int) -> _Raw:
    """A new blob in the repository's object database (GitPython's, no git process)."""
    from gitdb.base import IStream

    stream = repo.odb.store(IStream("blob", len(data), BytesIO(data)))
    return _Raw(stream.binsha, mode, data)


def _put(index, path: str, blob) -> None:
    """`path` settled in the temporary index: this blob at stage 0, or gone (blob None)."""
    from git.index.typ import BaseIndexEntry, IndexEntry

    for stage in (0, 1, 2, 3):
        index.entries.pop((path, stage), None)
    if blob is not None:
        base = BaseIndexEntry((blob.mode, blob.binsha, 0, path))
        index.entries[(path, 0)] = IndexEntry.from_base(base)


# -- bringing the files to the new commit --------------------------------------------------------

def checkout(root: Path, sidecar: Path, ref: str, old: str, new: str) -> list[tuple[str, str]]:
    """Bring the files, the index and the branch `ref` from commit `old` to `new`: [(status, path)]
    of the files that changed (A, M, D). Refuses, before writing anything, a file that differs
    from both versions (a change made by hand and not committed: SyncConflict naming it)."""
    changes = _diff(root, old, new)
    for _status, path, old_blob, new_blob, _mode in changes:
        current = _worktree_blob(root / path)
        if current not in (old_blob, new_blob):
            raise SyncConflict(
                f"{path} has changes that are not committed, and the remote changed it too; nothing was "
                f"changed here: commit it (`git -C {root} commit -m 'changed by hand' {path}`) or put it back, "
                "then run memvault sync again")
    journal = sidecar / JOURNAL
    files.atomic_write(journal, json.dumps({"ref": ref, "from": old, "to": new}))
    _write(root, changes)
    gitrepo.git_output(root, "update-index", "--add", "--remove", "-z", "--stdin",
                       input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for _, p, *_ in changes))
    gitrepo.git_output(root, "update-ref", "-m", "memvault sync", ref, new, old)
    journal.unlink(missing_ok=True)
    return [(status, path) for status, path, *_ in changes]


def resume(root: Path, sidecar: Path) -> list[tuple[str, str]]:
    """Finish a checkout a kill interrupted (the journal is there): the same files written again, the
    branch moved. Nothing to do when the branch moved already or elsewhere. Returns its changes."""
    journal = sidecar / JOURNAL
    try:
        plan = json.loads(journal.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        journal.unlink(missing_ok=True)
        return []
    gitrepo.clear_stale_index_lock(root)  # the git a kill took with it may have left its locks
    head = _ref_sha(root, plan["ref"])
    if head == plan["from"] and _ref_sha(root, plan["to"] + "^{commit}") == plan["to"]:
        return checkout(root, sidecar, plan["ref"], plan["from"], plan["to"])
    journal.unlink(missing_ok=True)
    if head == plan["to"]:  # killed after the branch moved: only the journal (and the index rows) were left
        return [(status, path) for status, path, *_ in _diff(root, plan["from"], plan["to"])]
    return []


def _ref_sha(root: Path, ref: str) -> str | None:
    status, out, _ = gitrepo._run(root, "rev-parse", "-q", "--verify", ref)
    return out.decode("ascii", "replace").strip() if status == 0 else None


def _diff(root: Path, old: str, new: str) -> list[tuple[str, str, str | None, str | None, str]]:
    """(status, path, old blob, new blob, new mode) of every file that differs between two commits."""
    out = gitrepo.git_output(root, "-c", "core.quotePath=false", "diff-tree", "-r", "-z", "--no-renames", old, new)
    fields = out.split("\0")
    rows = []
    for i in range(0, len(fields) - 1, 2):
        meta = fields[i].lstrip(":").split()
        if len(meta) < 5:
            continue
        _old_mode, new_mode, old_blob, new_blob, status = meta[:5]
        rows.append((status[0], fields[i + 1], None if old_blob == _ZERO else old_blob,
                     None if new_blob == _ZERO else new_blob, new_mode))
    return rows


def _worktree_blob(path: Path) -> str | None:
    """The blob id git would give the file as it is now (None: no file)."""
    try:
        if path.is_symlink():
            data = os.readlink(path).encode("utf-8", "surrogateescape")
        else:
            data = path.read_bytes()
    except FileNotFoundError:
        return None
    except (IsADirectoryError, NotADirectoryError):
        return "a folder"
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _write(root: Path, changes) -> None:
    """Each file as the new commit has it (atomically), or removed; all of it durable before the
    branch moves (a power cut after that must not find files missing, which the next sync would
    commit as deletions)."""
    blobs = gitrepo.read_blob_bytes(root, [new for _, _, _, new, _ in changes if new])
    written, emptied = [], set()
    for status, path, _old, new_blob, mode in changes:
        target = root / path
        files.ensure_inside(root, target)
        if new_blob is None:
            try:
                target.unlink()
                emptied.add(target.parent)
            except FileNotFoundError:
                pass
            continue
        data = blobs[new_blob]
        if mode == "120000":  # a symbolic link, as git stores it: its target
            target.unlink(missing_ok=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(data.decode("utf-8", "surrogateescape"), target)
            continue
        if target.is_symlink() or target.is_dir():
            raise MemvaultError(f"cannot write {path}: a link or folder is in the way")
        files.atomic_write_bytes(target, data, executable=mode == "100755", durable=False)
        written.append(target)
    files.fsync_paths(written + sorted(emptied))  # a folder's own entry is made durable in its parent
