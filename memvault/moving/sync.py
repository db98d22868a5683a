"""`memvault clone` and `memvault sync`: one vault on several machines over git remotes
(docs/design.md, "One vault on several machines").

sync, in four steps, each of which a kill may cut short without loss (the next sync finishes it):

1. under the vault lock: finish a sync a kill interrupted (merge.resume), then commit the hand
   edits under entries/ the way `reindex` does;
2. fetch, without the lock (it changes only remote-tracking refs and objects);
3. under the lock: nothing new, a fast-forward, or a merge with memvault's rules (merge.py); the
   files brought to the result (merge.checkout), and only the files that changed re-indexed;
4. push, without the lock. A push the remote refuses because it moved meanwhile says so; the
   next sync merges what moved and pushes again.

Remotes, fetch, push and clone go through GitPython (`Repo.remote`, `Remote.fetch`,
`Remote.push`, `Repo.clone_from`); failures become one line that says which of "no remote",
"unreachable", "refused the credentials", "rejected the push" it was.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from memvault.store import files, gitrepo
from memvault.errors import MemvaultError, RemoteError, SyncConflict, UsageError

# Lines of git's (or ssh's, or curl's) stderr that tell what kind of failure it was.
_AUTH = ("authentication failed", "could not read username", "could not read password",
         "terminal prompts disabled", "permission denied (publickey", "permission denied, please try again",
         "http basic: access denied", "returned error: 401", "returned error: 403",
         "invalid username or password", "invalid credentials")
_UNREACHABLE = ("could not resolve host", "connection refused", "failed to connect", "couldn't connect",
                "does not appear to be a git repository", "connection timed out", "no route to host",
                "network is unreachable", "repository not found", "could not read from remote repository",
                "unable to access", "operation timed out", "not found")

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class SyncResult:
    """What one `sync` did: the hand edits it committed first, what it pulled (commits, files), how
    it integrated them (and the conflicts it settled), what it re-indexed and what it pushed."""

    remote: str
    url: str
    branch: str
    remote_branch: str
    hand_edits: list[str] = field(default_factory=list)
    hand_edit_commit: str | None = None
    pulled_commits: int = 0
    pulled: list[tuple[str, str]] = field(default_factory=list)  # (A/M/D, path) brought in
    integration: str = "up to date"  # up to date, fast-forward, merge, resumed
    merge_commit: str | None = None
    resolved: list = field(default_factory=list)  # merge.Resolution
    reindexed: Any = None  # index.SyncReport of the files that changed
    pushed_commits: int = 0
    pushed: bool = False
    head: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    # The files left out, as (errors.MemoryFileError, "hand edit" or "pulled"): a hand edit whose front
    # matter does not parse or that claims another file's id is neither indexed, committed nor pushed; a
    # pulled file that does not read is not indexed.
    skipped: list = field(default_factory=list)

    def left_out(self) -> list[str]:
        """One line per file left out: what it is, why, and that a hand edit did not leave this machine."""
        return [f"left out {problem.path}: {problem.reason}; " + (
            "this hand edit is not committed, so not pushed: fix it and run memvault sync again"
            if where == "hand edit" else "pulled, and not indexed until it is fixed (the search after reads it)")
            for problem, where in self.skipped]

    def to_json(self) -> dict[str, Any]:
        report = self.reindexed
        return {
            "remote": self.remote, "url": self.url, "branch": self.branch, "remote_branch": self.remote_branch,
            "committed": {"hand_edits": self.hand_edits, "commit": self.hand_edit_commit},
            "pulled": {"commits": self.pulled_commits,
                       "files": [{"status": status, "path": path} for status, path in self.pulled]},
            "integration": self.integration, "merge_commit": self.merge_commit,
            "resolved": [r.to_json() for r in self.resolved],
            "reindexed": ({"added": report.added, "changed": report.changed, "removed": report.removed,
                           "skipped": [{"path": str(e.path), "reason": e.reason} for e in report.skipped]}
                          if report is not None else {"added": [], "changed": [], "removed": [], "skipped": []}),
            "pushed": {"commits": self.pushed_commits, "to": f"{self.remote}/{self.remote_branch}"}
            if self.pushed else None,
            "head": self.head, "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "skipped": [{"path": str(e.path), "reason": e.reason, "from": where} for e, where in self.skipped],
        }


@dataclass
class CloneResult:
    """What `clone` made: the vault (a Memvault, opened), where from, and its index build."""

    vault: Any
    url: str
    branch: str | None
    commit: str | None
    index: Any  # index.SyncReport
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.vault.root), "url": self.url, "branch": self.branch, "commit": self.commit,
                "indexed": len(self.index.added), "skipped": [{"path": str(e.path), "reason": e.reason}
                                                             for e in self.index.skipped],
                "seconds": round(self.seconds, 3)}


# -- sync --------------------------------------------------------------------------------------

def sync(vault, remote: str | None = None, push: bool = True, progress: Progress | None = None,
         index_lock=None, push_secrets: bool = False) -> SyncResult:
    """Commit hand edits, fetch, integrate (conflicts settled), re-index what changed, push (not what
    holds a secret, unless push_secrets: scrub.secrets_to_push).
    index_lock: held around the steps that write the index (a Memvault's: one index sync at a time
    in its process), not around the network."""
    from contextlib import nullcontext

    from memvault.moving import merge
    from memvault.store import reindex as reindexing

    index_lock = index_lock if index_lock is not None else nullcontext()

    root = vault.root
    _require_repository(vault)
    clock = time.perf_counter()
    git_repo = gitrepo.repo(root)
    try:
        if git_repo.config_reader("repository").get_value("extensions", "objectformat", "sha1") != "sha1":
            raise MemvaultError(f"the vault {root} is a SHA-256 git repository; sync handles SHA-1 ones only")
        branch = _branch(git_repo, root)
        name, remote_branch = _pick_remote(git_repo, root, branch, remote)
        url = _redact(git_repo.remote(name).url)
    finally:
        git_repo.close()
    result = SyncResult(name, url, branch, remote_branch)

    # 1. A sync a kill interrupted is finished first; then the hand edits are committed.
    resumed: list[tuple[str, str]] = []
    with index_lock:
        edits = reindexing.commit_hand_edits(vault, "sync", verify=False,
                                             first=lambda: resumed.extend(merge.resume(root, vault.sidecar)))
    result.hand_edits, result.hand_edit_commit = edits.paths, edits.commit
    result.skipped = [(problem, "hand edit") for problem in edits.report.skipped]  # not committed: not pushed
    if resumed:
        result.integration, result.pulled = "resumed", resumed
    result.seconds["commit"] = time.perf_counter() - clock

    # 2. Fetch.
    clock = time.perf_counter()
    _fetch(vault, name, url, progress, result)
    theirs = _sha(root, f"refs/remotes/{name}/{remote_branch}")
    result.seconds["fetch"] = time.perf_counter() - clock

    # 3. Integrate, under the lock.
    clock = time.perf_counter()
    try:
        with index_lock:
            _integrate(vault, result, theirs, progress)
    except (SyncConflict, RemoteError) as exc:
        exc.result = result
        raise
    result.seconds["integrate"] = time.perf_counter() - clock

    # 4. Push.
    result.head = gitrepo.head_sha(root)
    if push and result.head and result.head != theirs:
        clock = time.perf_counter()
        ahead = int(gitrepo.git_output(root, "rev-list", "--count", result.head,
                                       *([f"^{theirs}"] if theirs else [])).strip() or 0)
        if ahead and not push_secrets:
            from memvault.changing import scrub
            from memvault.errors import SecretsFound

            found = scrub.secrets_to_push(vault, result.head, theirs)
            if found:
                raise SecretsFound(scrub.refusal(found, f"{name}/{remote_branch}"), found, result)
        if ahead:
            _push(vault, name, url, branch, remote_branch, progress, result)
            result.pushed_commits, result.pushed = ahead, True
        result.seconds["push"] = time.perf_counter() - clock
    return result


def _require_repository(vault) -> None:
    vault.require_existing()
    if not vault.settings.enable_git_versioning:
        raise UsageError(f"sync needs git: the vault {vault.root} has enable_git_versioning = false")
    if not gitrepo.is_repo(vault.root):
        raise MemvaultError(f"the vault {vault.root} is not a git repository yet (it becomes one with its first write)")
    gitrepo.check_writable(vault.root)


def _branch(git_repo, root: Path) -> str:
    try:
        return git_repo.active_branch.name
    except TypeError:  # a detached HEAD; check_writable said so already, for writes
        raise MemvaultError(f"the vault {root} is on a detached HEAD; run `git -C {root} switch <branch>` "
                            "first") from None


def _pick_remote(git_repo, root: Path, branch: str, wanted: str | None) -> tuple[str, str]:
    """(remote, branch there): --remote, else the branch's upstream, else origin, else the only one."""
    names = [r.name for r in git_repo.remotes]
    upstream = None
    try:
        upstream = git_repo.active_branch.tracking_branch()
    except (ValueError, TypeError):
        pass
    if wanted is not None:
        if wanted not in names:
            raise UsageError(f"no remote named {wanted!r} in {root} "
                             f"({'remotes: ' + ', '.join(names) if names else 'it has none'})")
        name = wanted
    elif upstream is not None and upstream.remote_name in names:
        name = upstream.remote_name
    elif "origin" in names:
        name = "origin"
    elif len(names) == 1:
        name = names[0]
    elif not names:
        raise RemoteError(f"the vault {root} has no git remote to sync with; add one with `git -C {root} remote add "
                          "origin URL` (a bare repository on a server, GitHub, any git host), then run memvault sync "
                          "again", kind="no-remote")
    else:
        raise UsageError(f"the vault {root} has several remotes ({', '.join(names)}) and its branch {branch} has no "
                         "upstream; say which: remote NAME", params="remote")
    remote_branch = upstream.remote_head if upstream is not None and upstream.remote_name == name else branch
    return name, remote_branch


# A ref lock git left ("Unable to create '.../refs/remotes/origin/main.lock': File exists"): a git
# fetch of a sync killed a moment ago may still be finishing (it holds the lock for milliseconds),
# or was killed with it and left the file. Wait for the one; the other, untouched this long, is stale.
_REF_LOCK = re.compile(r"Unable to create '([^']+\.lock)': File exists")
STALE_REF_LOCK_S = 10.0


def _fetch(vault, name: str, url: str, progress: Progress | None, result: SyncResult) -> None:
    git = gitrepo.git_module()
    git_repo = gitrepo.repo(vault.root)
    watcher = _Progress(progress)
    try:
        for attempt in range(3):
            # A watcher per attempt: GitPython reads the fetched refs from the lines it collected
            watcher = _Progress(progress)
            try:
                git_repo.remote(name).fetch(progress=watcher)
                return
            except git.GitCommandError as exc:
                lock = _REF_LOCK.search(str(getattr(exc, "stderr", "") or exc))
                if lock is None or attempt == 2 or not _ref_lock_gone(vault, Path(lock[1])):
                    raise
    except (git.GitCommandError, git.exc.UnsafeProtocolError) as exc:
        raise _failure("fetch from", name, url, exc, watcher, result,
                       "nothing was pulled; what is here is committed and safe") from None
    finally:
        git_repo.close()


def _ref_lock_gone(vault, lock: Path) -> bool:
    """Whether a ref lock under the vault's .git is gone: waited for while it changes, removed once
    it has been left untouched for STALE_REF_LOCK_S (no git holds a ref lock that long)."""
    if not lock.resolve().is_relative_to((vault.root / ".git").resolve()):
        return False
    deadline = time.monotonic() + STALE_REF_LOCK_S + 1
    while time.monotonic() < deadline:
        try:
            idle = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return True
        if idle >= STALE_REF_LOCK_S:
            lock.unlink(missing_ok=True)
            vault.notice(f"memvault: removed {lock}, a lock a killed git left {idle:.0f} s ago")
            return True
        time.sleep(0.1)
    return False


def _integrate(vault, result: SyncResult, theirs: str | None, progress: Progress | None) -> None:
    from memvault.moving import merge
    from memvault.store.lock import vault_lock

    root = vault.root
    gitrepo.check_writable(root)
    with vault_lock(vault.lock_path, timeout=vault.settings.lock_timeout, holder="sync", on_wait=vault.notice):
        ours = gitrepo.head_sha(root)
        ref = f"refs/heads/{result.branch}"
        target = None
        if theirs is not None and theirs != ours and not _is_ancestor(root, theirs, ours):
            result.pulled_commits = int(gitrepo.git_output(root, "rev-list", "--count", theirs, f"^{ours}").strip())
            if _is_ancestor(root, ours, theirs):
                target, result.integration = theirs, "fast-forward"
            else:
                where = f"{result.remote}/{result.remote_branch}"
                merged = merge.merge(root, ours, theirs, f"memvault sync: merged {where} ({result.pulled_commits} "
                                     f"commit{'s' if result.pulled_commits != 1 else ''})", where)
                target, result.integration = merged.commit, "merge"
                result.merge_commit, result.resolved = merged.commit, merged.resolved
        changed = list(result.pulled) if result.integration == "resumed" else []
        if target is not None:
            pulled = merge.checkout(root, vault.sidecar, ref, ours, target)
            result.pulled = pulled
            changed += pulled
        if changed:
            paths = sorted({root / path for _, path in changed})
            report = vault.index.take_in(paths, progress=(lambda done, total: progress("indexing", done, total))
                                         if progress else None)
            known = {str(problem.path) for problem, _ in result.skipped}
            result.skipped += [(problem, "pulled") for problem in report.skipped if str(problem.path) not in known]
            result.reindexed = report


def _push(vault, name: str, url: str, branch: str, remote_branch: str, progress: Progress | None,
          result: SyncResult) -> None:
    git = gitrepo.git_module()
    git_repo = gitrepo.repo(vault.root)
    watcher = _Progress(progress)
    try:
        infos = git_repo.remote(name).push(f"refs/heads/{branch}:refs/heads/{remote_branch}", progress=watcher)
    except (git.GitCommandError, git.exc.UnsafeProtocolError) as exc:
        raise _failure("push to", name, url, exc, watcher, result,
                       "what was pulled is merged here and nothing is lost") from None
    finally:
        git_repo.close()
    bad = git.PushInfo.ERROR | git.PushInfo.REJECTED | git.PushInfo.REMOTE_REJECTED | git.PushInfo.REMOTE_FAILURE
    failed = [info for info in infos if info.flags & bad] or ([None] if not infos else [])
    if failed:
        info = failed[0]
        summary = (info.summary.strip() if info is not None else "") or "no answer"
        if info is not None and info.flags & git.PushInfo.REJECTED:
            raise RemoteError(f"the remote {name} ({url}) moved while this sync ran (another machine pushed to "
                              f"{remote_branch} first), so it refused the push: {summary}; what was pulled is merged "
                              "here and nothing is lost; run memvault sync again to merge the newer changes and push",
                              kind="rejected", result=result)
        raise RemoteError(f"the remote {name} ({url}) refused the push to {remote_branch}: {summary}"
                          f"{_lines_cause(watcher.lines())}; nothing is lost here; run memvault sync again once the "
                          "remote accepts pushes", kind="rejected", result=result)
    _remember_upstream(vault.root, branch, name, remote_branch)


def _remember_upstream(root: Path, branch: str, name: str, remote_branch: str) -> None:
    """After a first push, the branch tracks the remote's (git's own config writer: GitPython's would
    rewrite the whole file in its own layout)."""
    status, out, _ = gitrepo._run(root, "config", "--get", f"branch.{branch}.remote")
    if status == 0 and out.strip():
        return
    gitrepo.git_output(root, "config", f"branch.{branch}.remote", name)
    gitrepo.git_output(root, "config", f"branch.{branch}.merge", f"refs/heads/{remote_branch}")


def _is_ancestor(root: Path, older: str, newer: str) -> bool:
    return gitrepo._run(root, "merge-base", "--is-ancestor", older, newer)[0] == 0


def _sha(root: Path, ref: str) -> str | None:
    status, out, _ = gitrepo._run(root, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}")
    return out.decode("ascii", "replace").strip() if status == 0 else None


# -- clone -------------------------------------------------------------------------------------

def clone(url: str, path: Path, open_vault: Callable[[Path], Any], progress: Progress | None = None) -> CloneResult:
    """Clone the vault at `url` into `path` (a new or empty folder) and build its index."""
    git = gitrepo.git_module()
    started = time.perf_counter()
    path = Path(path).expanduser().absolute()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UsageError(f"{path} exists and is not an empty folder; clone into a new folder (or, in a vault that "
                         "has this remote, run memvault sync)")
    existed = path.exists()
    watcher = _Progress(progress)
    try:
        cloned = git.Repo.clone_from(url, str(path), progress=watcher)
    except (git.GitCommandError, git.exc.UnsafeProtocolError) as exc:
        raise _failure("clone", "", _redact(url), exc, watcher, None, "nothing was written") from None
    try:
        branch = None if cloned.head.is_detached else cloned.active_branch.name
    finally:
        cloned.close()
    if not _looks_like_a_vault(path):
        _take_back_clone(path, existed)
        raise UsageError(f"{_redact(url)} is not a memvault vault (no entries/ folder, memvault.toml or "
                         ".memvault/ in its .gitignore); nothing was written. To bring its markdown notes in, "
                         f"`git clone {_redact(url)} FOLDER` then `memvault import markdown FOLDER`")
    vault = open_vault(path)
    inner = vault.vault
    inner.create()  # the sidecar, .gitignore when the remote has none; a first commit if it was empty
    from memvault.store.lock import vault_lock

    with vault_lock(inner.lock_path, timeout=inner.settings.lock_timeout, holder="clone", on_wait=inner.notice):
        report = inner.index.catch_up(progress=(lambda done, total: progress("indexing", done, total))
                                      if progress else None)
    for problem in report.skipped:
        inner.say(f"memvault: skipped {problem}")
    return CloneResult(vault, _redact(url), branch, gitrepo.head_sha(path), report, time.perf_counter() - started)


def _looks_like_a_vault(path: Path) -> bool:
    """A clone memvault may write to: an empty repository (a vault yet to be pushed to), or one with
    the marks a vault has (entries/, memvault.toml, .memvault/ ignored): a clone of another project
    would otherwise get memvault's commits."""
    if gitrepo.head_sha(path) is None or (path / files.ENTRIES).is_dir() or (path / "memvault.toml").is_file():
        return True
    try:
        ignored = (path / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    return any(line.strip().strip("/") == ".memvault" for line in ignored)


def _take_back_clone(path: Path, existed: bool) -> None:
    """Remove what a refused clone wrote: the folder it made, or what it put in the empty one given."""
    import shutil

    if not existed:
        shutil.rmtree(path, ignore_errors=True)
        return
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


# -- progress and failures ---------------------------------------------------------------------

def _Progress(callback: Progress | None):
    """GitPython's RemoteProgress, passing transfer progress on as (stage, done, total) and keeping
    every line git wrote, which a failure's message is taken from."""
    git = gitrepo.git_module()

    class Watcher(git.RemoteProgress):
        STAGES = {git.RemoteProgress.COUNTING: "counting objects", git.RemoteProgress.COMPRESSING: "compressing",
                  git.RemoteProgress.WRITING: "sending", git.RemoteProgress.RECEIVING: "receiving",
                  git.RemoteProgress.RESOLVING: "resolving deltas"}

        def update(self, op_code, cur_count, max_count=None, message=""):
            stage = self.STAGES.get(op_code & self.OP_MASK)
            if callback is not None and stage and max_count:
                callback(stage, int(cur_count), int(max_count))

        def lines(self) -> list[str]:
            return [*self.error_lines, *self.other_lines]

    return Watcher()


def _failure(doing: str, name: str, url: str, exc: Exception, watcher, result, safe: str) -> RemoteError:
    """One line for a failed fetch, push or clone: what kind of failure, git's own words, what to do."""
    lines = [*watcher.lines(), *str(getattr(exc, "stderr", "") or exc).splitlines()]
    lowered = [line.lower() for line in lines]
    where = f"the remote {name} ({url})" if name else url
    if any(p in line for line in lowered for p in _AUTH):
        cause = _pick(lines, _AUTH)
        return RemoteError(f"{where} refused the credentials: {cause}; set up access (an ssh key, or a git "
                           f"credential helper for https), then run memvault {'clone' if doing == 'clone' else 'sync'} "
                           f"again; {safe}", kind="auth", result=result)
    if any(p in line for line in lowered for p in _UNREACHABLE):
        cause = _pick(lines, _UNREACHABLE)
        return RemoteError(f"cannot reach {where}: {cause}; {safe}; run memvault "
                           f"{'clone' if doing == 'clone' else 'sync'} again once it is reachable",
                           kind="unreachable", result=result)
    cause = _pick(lines, ()) or type(exc).__name__
    return RemoteError(f"git could not {doing} {where}: {cause}; {safe}", kind="failed", result=result)


def _pick(lines: list[str], patterns) -> str:
    """The line that says why: the first matching one, else git's fatal/error line; without git's
    prefixes and any password."""
    cleaned = [line.strip().strip("'").strip() for line in lines if line.strip()]
    cleaned = [re.sub(r"^(stderr: |fatal: |error: |remote: )+", "", line) for line in cleaned]
    chosen = next((line for line in cleaned if any(p in line.lower() for p in patterns)), None)
    if chosen is None:
        chosen = gitrepo._git_cause("\n".join(lines)) or (cleaned[-1] if cleaned else "")
        chosen = re.sub(r"^(stderr: |fatal: |error: )+", "", chosen.strip().strip("'"))
    return _redact(chosen.rstrip("."))


def _lines_cause(lines: list[str]) -> str:
    cause = _pick(lines, ())
    return f" ({cause})" if cause else ""


def _redact(text: str) -> str:
    """A URL (or a line holding one) without its password: https://user:secret@host -> https://user@host."""
    return re.sub(r"(://[^/@:\s]*):[^/@\s]*@", r"\1@", str(text))
