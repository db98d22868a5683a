"""The vault as a git repository: init, one commit per command, history.

Through GitPython: `Repo` for what it reads from the repository's files without starting git
(HEAD, refs, config, remotes: see moving/sync.py), and its `Git` command wrapper where one git
process does the job, so that a write starts as few processes as it can: `git update-index`
and `git commit --only` for a change to an existing vault (plus the two `git version` probes
GitPython runs when it is imported). A command commits exactly the files it wrote or moved
(and `reindex` the hand edits it accepted), never whatever else lies in the folder: a stray
file, a file reindex rejected, something the user staged. Before anything is written,
`check_writable` refuses a repository git could not commit to cleanly (docs/design.md,
"Commits"). Commits carry trailers that say which memories a command touched, so
`memvault log` can tell the story later:
  Memvault-Added: <id>
  Memvault-Deleted: <id>
  Memvault-Replaced: <old> -> <new>
  Memvault-Edited: <id>
  Memvault-Evicted: <id>
  Memvault-Restored: <id>
  Memvault-Removed: <id>
  Memvault-Undoes: <commit>   (an undo: the commit it took back)
  Memvault-Conversation: <conversation> (<n> added)   (a bulk change, an import: instead of every id)
  Memvault-Resolved: <id or path>: <how>   (a sync that merged: each conflict and what was kept)
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from memvault.errors import MemvaultError, UsageError, VaultStateError

GITIGNORE = """\
# memvault: the index is rebuilt from the files and is never committed
.memvault/
# temp files from atomic writes and editors
*.tmp
.*.swp
*~
.#*
"""
FALLBACK_NAME = "memvault"
FALLBACK_EMAIL = "memvault@localhost"
# Variables that would point git at another repository than the vault.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")  # SHA-1 or SHA-256


class GitError(MemvaultError):
    """A git command that failed; `cause` is the line of its stderr that says why."""

    def __init__(self, root: Path, command: str, stderr: str):
        self.cause = _git_cause(stderr) or f"git {command} failed"
        super().__init__(f"git {command} in {root} failed: {self.cause}")


def _git_env() -> None:
    for name in _GIT_REDIRECTS:
        os.environ.pop(name, None)
    # Never open an editor, pager or password prompt from inside memvault.
    os.environ["GIT_TERMINAL_PROMPT"] = "0"
    # Without git, GitPython's import would raise its own ImportError: memvault says it in one line.
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")


def git_module():
    """GitPython, imported on first use: ~40-60 ms, and two `git version` probes (its own and
    its fetch flags')."""
    _git_env()
    import git

    return git


def repo(root: Path):
    """The vault's repository as a GitPython `Repo` (reads .git's files; starts no process)."""
    git = git_module()
    try:
        return git.Repo(str(root))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise MemvaultError(f"{root} is not a git repository") from None


def _run(root: Path, *args: str, input: bytes | None = None, env: dict | None = None) -> tuple[int, bytes, str]:
    """One git command in the vault through GitPython's command wrapper: (status, stdout, stderr).
    git's messages are in English whatever the locale (GitPython sets LC_ALL=C): _git_cause looks
    for "fatal:" and "error:"."""
    git = git_module()
    with _stdin(input) as stream:
        try:
            return git.Git(str(root)).execute(
                [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *args], istream=stream, env=env,
                with_extended_output=True, with_exceptions=False, stdout_as_string=False,
                strip_newline_in_stdout=False)
        except git.GitCommandNotFound:
            raise MemvaultError("git is not installed (or set enable_git_versioning = false)") from None


class _stdin:
    """Bytes for a git command's stdin, as GitPython takes them: an open file (a pipe written
    while git reads it would need a thread)."""

    def __init__(self, data: bytes | None):
        self.data, self.handle = data, None

    def __enter__(self):
        if self.data is None:
            return None
        self.handle = tempfile.TemporaryFile()
        self.handle.write(self.data)
        self.handle.seek(0)
        return self.handle

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()


def git_output(root: Path, *args: str, input: bytes | None = None) -> str:
    """stdout of one git command in the vault; GitError naming the cause if it fails."""
    status, out, err = _run(root, *args, input=input)
    if status != 0:
        raise GitError(root, args[0], err)
    return out.decode("utf-8", "surrogateescape")


def is_repo(root: Path) -> bool:
    """The vault is a repository of its own (.git: a folder, or a file for a worktree)."""
    return os.path.lexists(root / ".git")


def init_repo(root: Path) -> None:
    """git init the vault, write .gitignore, initial commit.

    Runs before every change, so on a vault that has its first commit it starts no process.
    """
    born = is_repo(root) and head_sha(root) is not None
    if not born:
        git_module().Repo.init(str(root), quiet=True)  # also completes a .git a killed `git init` left half-made
    ignore = root / ".gitignore"
    if not ignore.exists():
        from memvault.store.files import atomic_write

        atomic_write(ignore, GITIGNORE)  # a half-written .gitignore would let .memvault/ into git
    if not born:
        clear_stale_index_lock(root)  # a first commit killed half-way
        first = [".gitignore"] + (["memvault.toml"] if (root / "memvault.toml").exists() else [])
        git_output(root, "add", "--", *first)
        _commit(root, "memvault init: new vault\n")


def read_blobs(root: Path, names: list[str]) -> dict[str, str | None]:
    """The text of many `<rev>:<path>` objects through one `git cat-file --batch`; None where an
    object is missing."""
    return {name: None if data is None else data.decode("utf-8", "replace")
            for name, data in read_blob_bytes(root, names).items()}


def read_blob_bytes(root: Path, names: list[str]) -> dict[str, bytes | None]:
    """read_blobs, as bytes."""
    if not names:
        return {}
    status, data, err = _run(root, "cat-file", "--batch", input=("\n".join(names) + "\n").encode("utf-8"))
    if status != 0:
        raise GitError(root, "cat-file", err)
    result: dict[str, bytes | None] = {}
    pos = 0
    for name in names:
        end = data.index(b"\n", pos)
        header = data[pos:end].decode("utf-8", "replace")
        pos = end + 1
        if header.endswith((" missing", " ambiguous")):
            result[name] = None
            continue
        size = int(header.rsplit(" ", 1)[1])
        result[name] = data[pos:pos + size]
        pos += size + 1
    return result


def check_date(root: Path, text: str, option: str = "since") -> None:
    """Refuse a date git would not understand. git reads anything (`--since garbage` silently means
    "now"), so a text that comes back as the present moment without saying so is not a date."""
    status, out, _ = _run(root, "rev-parse", f"--since={text}")
    value = out.decode("ascii", "replace").strip().rpartition("=")[2]
    if status != 0 or not value.isdigit() or (
            abs(int(value) - time.time()) <= 2 and text.strip().lower() not in ("now", "today")):
        raise UsageError(f"{option} {text!r} is not a date (try 2026-01-31, \"2 weeks ago\" or yesterday)",
                         params=option)


def head_sha(root: Path) -> str | None:
    """The commit HEAD points at, None before the first commit.

    GitPython reads it from the files (HEAD, a loose or packed ref) without starting git; what
    it cannot read (the reftable backend, a broken ref) is asked of git.
    """
    if not is_repo(root):
        return None
    git = git_module()
    try:
        # The ref's sha as written in the files; `head.commit` would start `git cat-file` to learn
        # the object's type.
        return git.SymbolicReference.dereference_recursive(git.Repo(str(root)), "HEAD")
    except ValueError:  # "Reference at 'refs/heads/main' does not exist": an unborn branch
        if not (_git_dir(root) / "reftable").exists():
            return None
    except Exception:
        pass
    status, out, _ = _run(root, "rev-parse", "-q", "--verify", "HEAD^{commit}")
    sha = out.decode("ascii", "replace").strip()
    return sha if status == 0 and sha else None


def _commit(root: Path, message: str, only: list[str] | None = None) -> bool:
    """git commit; False when there was nothing to commit. The message goes on stdin: Linux caps
    one argument at 128 KiB, and a bulk add names thousands of ids in its message.

    only: commit just these paths (`git commit --only`), leaving anything else in the index
    (something the user staged by hand) out of memvault's commit. They go to git in a file,
    since stdin carries the message.

    No `git status` first: a commit with nothing to commit fails, and only then does git tell
    that apart from a real failure. Nor is the identity checked before every change: only when
    a commit fails is git asked whether it knows the user; if it does not, the vault's own config
    gets memvault's identity and the commit is tried again.
    """
    with _pathspec_file(root, only) as pathspec:
        args = ["commit", "-q", "--no-verify", "-F", "-"]
        if pathspec:
            args += ["--only", f"--pathspec-from-file={pathspec}", "--pathspec-file-nul"]
        data = _encode(message)
        status, out, err = _run(root, *args, input=data)
        if status == 0:
            return True
        if _nothing_to_commit(root, out, only):
            return False
        if not has_identity(root):
            set_fallback_identity(root)
            status, out, err = _run(root, *args, input=data)
        if status != 0:
            raise GitError(root, "commit", err)
    return True


def commit_tree(root: Path, tree: str, parents: list[str], message: str) -> str:
    """A commit of `tree` with these parents (a merge), its message on stdin; the same identity
    fallback as every commit. Moves no branch: returns the new commit's sha."""
    args = ["commit-tree", tree, *[arg for parent in parents for arg in ("-p", parent)]]
    data = _encode(message)
    status, out, err = _run(root, *args, input=data)
    if status != 0 and not has_identity(root):
        set_fallback_identity(root)
        status, out, err = _run(root, *args, input=data)
    if status != 0:
        raise GitError(root, "commit-tree", err)
    return out.decode("ascii").strip()


def _nothing_to_commit(root: Path, stdout: bytes, only: list[str] | None) -> bool:
    if only is not None:
        # git explains an empty --only commit on stdout (in English: GitPython sets LC_ALL=C).
        out = stdout.decode("utf-8", "replace")
        return any(words in out for words in ("nothing to commit", "nothing added to commit",
                                              "no changes added to commit"))
    return _run(root, "diff", "--cached", "--quiet")[0] == 0


class _pathspec_file:
    """A NUL-separated list of paths in a temp file under .git/ (never committed), or None."""

    def __init__(self, root: Path, paths: list[str] | None):
        self.root, self.paths, self.path = root, paths, None

    def __enter__(self) -> str | None:
        if self.paths is None:
            return None
        fd, self.path = tempfile.mkstemp(prefix="memvault-paths-", dir=_git_dir(self.root))
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"".join(_encode(p) + b"\0" for p in self.paths))
        return self.path

    def __exit__(self, *exc) -> None:
        if self.path:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def _git_dir(root: Path) -> Path:
    """The repository folder: .git, or where a worktree's .git file points."""
    dot_git = root / ".git"
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text[len("gitdir:"):].strip())
            return target if target.is_absolute() else (root / target).resolve()
    return dot_git


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")  # undecodable bytes of argv: the bytes they were
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def has_identity(root: Path) -> bool:
    """Does git know who commits (user config, environment, or the system's name and mail)?"""
    return all(_run(root, "var", name)[0] == 0 for name in ("GIT_COMMITTER_IDENT", "GIT_AUTHOR_IDENT"))


def set_fallback_identity(root: Path) -> None:
    """Commit as memvault, in the vault's own config only (never the user's global one)."""
    git_output(root, "config", "--local", "user.name", FALLBACK_NAME)
    git_output(root, "config", "--local", "user.email", FALLBACK_EMAIL)


def clear_stale_index_lock(root: Path, older_than: float = 2.0) -> None:
    """Lock files left by a killed git (index.lock, HEAD.lock, a branch's or a remote branch's ref
    lock, config.lock) block every later commit, fetch or setting.

    We only get here while holding the vault lock, so no other memvault process is inside git:
    a lock older than `older_than` seconds belongs to a dead process and goes. A younger one may
    be a git command the person runs in the vault right now, or a git killed a moment ago: it
    gets until it is that old to disappear, then goes too.
    """
    git_dir = root / ".git"
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "packed-refs.lock", git_dir / "config.lock"]
    for refs in (git_dir / "refs" / "heads", git_dir / "refs" / "remotes"):  # a branch's, a fetch's (sync)
        if refs.is_dir():
            locks += sorted(refs.rglob("*.lock"))
    for lock in locks:
        _clear_lock(lock, older_than)


def _clear_lock(lock: Path, older_than: float) -> None:
    deadline = time.monotonic() + older_than + 1.0
    while True:
        try:
            age = time.time() - lock.lstat().st_mtime
        except FileNotFoundError:
            return
        if age > older_than:
            try:
                lock.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                pass  # not a plain file: leave it, and git's own error will name it
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def _git_cause(stderr: str) -> str:
    """The line of git's stderr that says what went wrong (git ends with advice, not the cause)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for prefix in ("fatal:", "error:"):
        found = next((line for line in lines if line.startswith(prefix)), None)
        if found:
            return found
    return lines[-1] if lines else ""


@dataclass
class CommitRecord:
    subject: str
    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    replaced: list[tuple[str, str]] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    scrubbed: list[str] = field(default_factory=list)  # secrets replaced by placeholders (memvault scrub)
    undoes: str | None = None
    conversations: list[tuple[str, int]] = field(default_factory=list)  # (conversation, memories added)

    def message(self) -> str:
        trailers = [f"Memvault-Added: {i}" for i in self.added]
        trailers += [f"Memvault-Conversation: {c} ({n} added)" for c, n in self.conversations]
        trailers += [f"Memvault-Deleted: {i}" for i in self.deleted]
        trailers += [f"Memvault-Replaced: {old} -> {new}" for old, new in self.replaced]
        trailers += [f"Memvault-Edited: {i}" for i in self.edited]
        trailers += [f"Memvault-Evicted: {i}" for i in self.evicted]
        trailers += [f"Memvault-Restored: {i}" for i in self.restored]
        trailers += [f"Memvault-Removed: {i}" for i in self.removed]
        trailers += [f"Memvault-Scrubbed: {i}" for i in self.scrubbed]
        trailers += [f"Memvault-Undoes: {self.undoes}"] if self.undoes else []
        return self.subject + ("\n\n" + "\n".join(trailers) if trailers else "") + "\n"


def commit_paths(root: Path, record: CommitRecord, paths: list[str]) -> str | None:
    """Stage exactly `paths` (relative to the vault: written, changed or removed files) and commit
    only them; returns the sha, or None if they changed nothing.

    `git update-index --add --remove` (stages new and changed files, drops removed ones, ignores a
    removed file git never knew), then the plumbing of _commit_staged, or `git commit --only`.
    """
    if not is_repo(root):
        init_repo(root)
    rels = sorted(set(paths))
    if not rels:
        return None
    clear_stale_index_lock(root)
    try:
        git_output(root, "update-index", "--add", "--remove", "-z", "--stdin",
                   input=b"".join(_encode(p) + b"\0" for p in rels))
        try:
            committed = _commit_staged(root, record, rels)
            if committed is None:
                committed = _commit(root, record.message(), only=rels)
        except GitError as exc:
            if "did not match any file" not in exc.cause:
                raise
            # A removed file that git never knew (one a killed command left uncommitted): there is
            # nothing to record for it, and `--only` refuses a path git does not know.
            committed = _commit(root, record.message(), only=_known_paths(root, rels))
        if not committed:
            return None
    except GitError as exc:
        raise MemvaultError(f"git commit in {root} failed: {exc.cause} "
                            "(the files are saved; the next memvault command commits them)") from None
    return head_sha(root)


def _commit_staged(root: Path, record: CommitRecord, rels: list[str]) -> bool | None:
    """Commit what is staged when it is exactly (some of) `rels`, through git's plumbing: the tree
    from the index (`write-tree`, which reuses the cached trees of the folders nothing changed
    in), a commit of it (`commit-tree`) and HEAD moved from the commit it was (`update-ref`).
    `git commit --only` re-reads and re-stats the whole index and writes it twice: 0.4 s of CPU
    at 100,000 files, for one memory. True when committed, False when `rels` changed nothing,
    None when this cannot say (no commit yet, something else staged, a post-commit hook to run,
    HEAD moved meanwhile): the caller then runs `git commit --only`."""
    head = head_sha(root)
    hook = _post_commit_hook(root)
    if head is None or not hook or (root / hook).exists():
        return None
    status, out, _ = _run(root, "write-tree")
    if status != 0:
        return None  # unmerged entries: git commit says what is wrong
    tree = out.decode("ascii", "replace").strip()
    status, out, _ = _run(root, "diff-tree", "-r", "--no-renames", "--name-only", "-z", head, tree)
    if status != 0:
        return None
    paths = {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}
    if not paths:
        return False
    if not paths <= set(rels):
        return None  # the user staged something of their own: --only leaves it staged
    commit = commit_tree(root, tree, [head], record.message())
    if _run(root, "update-ref", "-m", f"commit: {record.subject}", "HEAD", commit, head)[0] != 0:
        return None  # HEAD moved meanwhile (a commit by hand): committed the ordinary way instead
    if _many_loose_objects(root):
        _run(root, "maintenance", "run", "--auto", "--quiet")  # what git commit does after committing
    return True


# Where git looks for the post-commit hook, per vault and the config files that may move it
# (core.hooksPath): asked of git once, not before every commit (serve commits every exchange).
_HOOK_PATHS: dict[tuple, str | None] = {}


def _post_commit_hook(root: Path) -> str | None:
    """The post-commit hook's path as git names it (relative to the vault, or absolute); None if git
    could not say."""
    def stamp(path: Path) -> int | None:
        try:
            return path.stat().st_mtime_ns
        except OSError:
            return None

    home = Path(os.environ.get("HOME") or os.path.expanduser("~"))
    key = (str(root), stamp(_git_dir(root) / "config"), stamp(home / ".gitconfig"),
           stamp(home / ".config/git/config"), os.environ.get("GIT_CONFIG_GLOBAL"))
    if key not in _HOOK_PATHS:
        status, out, _ = _run(root, "rev-parse", "--git-path", "hooks/post-commit")
        _HOOK_PATHS[key] = out.decode("utf-8", "surrogateescape").strip() if status == 0 else None
    return _HOOK_PATHS[key] or None


def _many_loose_objects(root: Path) -> bool:
    """git's own test for `gc --auto` (more than gc.auto = 6,700 loose objects, estimated from the
    folder objects/17), without starting a process for it after every commit."""
    try:
        return len(os.listdir(_git_dir(root) / "objects" / "17")) > 6700 // 256
    except OSError:
        return False


def _known_paths(root: Path, rels: list[str]) -> list[str]:
    """The paths git knows: on disk (staged just now) or in HEAD (a removal to record)."""
    in_head = set(git_output(root, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *rels).split("\0"))
    return [p for p in rels if p in in_head or (root / p).exists()]


# Where each of git's multi-step operations leaves its mark in the repository folder, and the git
# command that finishes it (`<command> --continue` or `--abort`).
_IN_PROGRESS = (
    ("MERGE_HEAD", "a merge", "merge"),
    ("rebase-merge", "a rebase", "rebase"),
    ("rebase-apply/applying", "a git am", "am"),
    ("rebase-apply", "a rebase", "rebase"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "cherry-pick"),
    ("REVERT_HEAD", "a revert", "revert"),
)


def check_writable(root: Path) -> None:
    """Refuse, before anything is written, a vault whose repository cannot take a memvault commit
    cleanly: git missing, a merge, rebase, cherry-pick or revert in progress (a commit would close
    it with conflict markers inside), or a detached HEAD (the commits would be lost at the next
    checkout). Reads files only, so every write pays no process for it. A repository that is not
    made yet passes: the first write creates it."""
    if shutil.which("git") is None:
        raise VaultStateError("git is not installed; install it, or set enable_git_versioning = false "
                              "to keep the vault without history; nothing was written")
    if not is_repo(root):
        return
    git_dir = _git_dir(root)
    for marker, what, command in _IN_PROGRESS:
        if (git_dir / marker).exists():
            raise VaultStateError(f"the vault {root} has {what} in progress; finish it with `git -C {root} {command} "
                                  f"--continue` or `git -C {root} {command} --abort`, then run memvault again; "
                                  "nothing was written")
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return  # an unreadable HEAD: git's own error names it at commit time
    if head and not head.startswith("ref:"):
        raise VaultStateError(f"the vault {root} is on a detached HEAD ({head[:12]}), where commits are lost at "
                              f"the next checkout; run `git -C {root} switch <branch>` (or `git -C {root} switch -c "
                              "<new-branch>` to keep what is checked out), then try again; nothing was written")



def changes_since(root: Path, commit: str | None, under: str, untracked_in: list[str] | None = None):
    """What may differ under `under` between `commit` and the folder as it is now, as git knows it
    from its own index (stat data for every tracked file, checked in C): a function that waits
    for the answer, so that the caller works meanwhile (the processes start now). The answer is
    (HEAD, {path: blob id at HEAD, "" where HEAD has none}) for every path that the commits since
    `commit` changed (None: HEAD itself), that the folder or the staging area changed against
    HEAD, or that git does not track (untracked and ignored files included); or None when git
    cannot tell: no commit yet, `commit` unknown (history rewritten and pruned), a nested
    repository, git missing or failing (docs/design.md, "The index"). untracked_in: look for
    untracked files only in these folders (none: no `git ls-files --others`); the caller knows
    the others have not had a file added or removed since it last looked."""
    # Plain processes, not GitPython's wrapper: they run at once, while the caller loads LanceDB,
    # and a search imports no GitPython (50 ms and two `git version` probes).
    import subprocess

    head = read_head(root)
    if head is None:
        return lambda: None
    _git_env()
    env = {**os.environ, "LANGUAGE": "C", "LC_ALL": "C"}
    commands = [["diff-index", "--raw", "-z", "--no-renames", "--no-abbrev", "HEAD", "--", under],
                ["ls-files", "-z", "--others", "--", *([under] if untracked_in is None else untracked_in)]
                if untracked_in is None or untracked_in else None,
                ["diff", "--raw", "-z", "--no-renames", "--no-abbrev", commit, head, "--", under]
                if commit is not None and commit != head else None]
    try:
        procs = [subprocess.Popen(["git", "-C", str(root), *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
                 if args is not None else None for args in commands]
    except OSError:  # git is not installed
        return lambda: None

    def answer():
        outputs = []
        for proc in procs:
            out = proc.communicate()[0] if proc is not None else b""
            outputs.append(out.decode("utf-8", "surrogateescape") if proc is None or proc.returncode == 0 else None)
        if any(out is None for out in outputs) or read_head(root) != head:
            return None  # git failed, or a commit landed meanwhile
        changed: dict[str, str] = {}
        if outputs[2]:  # what the commits since `commit` changed: the blob each left
            fields = outputs[2].split("\0")
            for meta, path in zip(fields[0::2], fields[1::2]):
                parts = meta.split()
                if len(parts) >= 5:
                    changed[path] = "" if parts[4].startswith("D") else parts[3]
        for path in outputs[1].split("\0"):  # untracked and ignored: none at HEAD
            if path:
                changed[path] = ""
        fields = outputs[0].split("\0")  # tracked files changed against HEAD: their blob at HEAD
        for meta, path in zip(fields[0::2], fields[1::2]):
            parts = meta.split()
            if len(parts) >= 5:
                changed[path] = "" if parts[2].strip("0") == "" else parts[2]
        if any(path.endswith("/") for path in changed):
            return None  # a folder git does not look into (a nested repository)
        return head, changed

    return answer


def blobs_at_head(root: Path, paths: list[str]) -> dict[str, str] | None:
    """{path: its blob id at HEAD, "" where HEAD has none}, by one `git cat-file --batch-check` (a plain
    process, as changes_since: a search imports no GitPython); None when git cannot tell (no commit yet,
    no git, a failure)."""
    import subprocess

    if not paths or read_head(root) is None:
        return None if paths else {}
    _git_env()
    names = "".join(f"HEAD:{path}\n" for path in paths).encode("utf-8", "surrogateescape")
    try:
        done = subprocess.run(["git", "-C", str(root), "cat-file", "--batch-check=%(objectname) %(objecttype)"],
                              input=names, capture_output=True, env={**os.environ, "LANGUAGE": "C", "LC_ALL": "C"})
    except OSError:
        return None
    rows = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if done.returncode != 0 or len(rows) != len(paths):
        return None
    return {path: row.split()[0] if row.endswith(" blob") else "" for path, row in zip(paths, rows)}


def read_head(root: Path) -> str | None:
    """The commit HEAD points at, read from .git's files when they are the plain kind (a branch
    whose ref is loose or packed), else head_sha: the index's sync reads it without importing
    GitPython."""
    git_dir = _git_dir(root)
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref: refs/heads/") and ".." not in head:
            ref = head[len("ref: "):]
            try:
                sha = (git_dir / ref).read_text(encoding="utf-8").strip()
            except FileNotFoundError:
                packed = (git_dir / "packed-refs").read_text(encoding="utf-8").splitlines()
                sha = next((line.partition(" ")[0] for line in packed if line.partition(" ")[2] == ref), "")
            if _SHA.match(sha):
                return sha
    except OSError:
        pass
    return head_sha(root)


def edited_since_head(root: Path, paths: list[str]) -> list[str]:
    """Those of these tracked files whose content differs from HEAD's (by content, not stat data)."""
    if not paths:
        return []
    status, out, _ = _run(root, "-c", "core.quotePath=false", "diff", "--name-only", "-z", "--no-renames", "HEAD",
                          "--", *(f":(literal){p}" for p in paths))
    return sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p) if status == 0 else []


def unstage(root: Path, paths: list[str]) -> None:
    """Set git's staging area back to HEAD for those of `paths` staged since (a change killed inside
    its `git update-index`: journal.py), leaving whatever else is staged alone. One `diff-index`
    (the index against HEAD's tree, whose cached trees spare the folders nothing changed in) and
    one `update-index --index-info`, not a pathspec per path: a bulk add's 100,000 of them."""
    if head_sha(root) is None:
        return
    wanted = set(paths)
    out = _run(root, "diff-index", "--cached", "--no-renames", "-z", "HEAD", "--", ENTRIES_PATHSPEC)[1]
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    lines = []
    for info, path in zip(fields[0::2], fields[1::2]):
        if path not in wanted or not info.startswith(":"):
            continue
        src_mode, _dst_mode, src_sha, _dst_sha, status = info[1:].split(" ")
        # Not in HEAD (added): mode 0 takes it out of the index; else HEAD's mode and blob go back
        lines.append(f"0 {'0' * len(src_sha)}\t{path}" if status.startswith("A") else f"{src_mode} {src_sha}\t{path}")
    if lines:
        git_output(root, "update-index", "-z", "--index-info", input=b"".join(_encode(line) + b"\0" for line in lines))


ENTRIES_PATHSPEC = "entries"


def refresh_index(root: Path) -> None:
    """Bring git's stat data up to date (files touched or copied without a change): until then,
    git reports them as possibly changed."""
    _run(root, "update-index", "-q", "--refresh")


def ignored(root: Path, paths: list[str]) -> list[str]:
    """Those of `paths` that git's ignore rules leave out (`git check-ignore`)."""
    out = _run(root, "check-ignore", "-z", "--stdin", input=b"".join(_encode(p) + b"\0" for p in paths))[1]
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
