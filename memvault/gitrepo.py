"""The vault as a git repository: init, one commit per command, history.

gitpython drives the real git binary. Commits carry trailers that say which
memories a command touched, so `memvault log` can tell the story later:
  Memvault-Added: <id>
  Memvault-Deleted: <id>
  Memvault-Replaced: <old> -> <new>
  Memvault-Edited: <id>
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from memvault.errors import MemvaultError

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


def _git_env() -> None:
    for name in _GIT_REDIRECTS:
        os.environ.pop(name, None)
    # Never open an editor or pager from inside memvault.
    os.environ["GIT_TERMINAL_PROMPT"] = "0"


def open_repo(root: Path):
    import git

    _git_env()
    try:
        return git.Repo(root)
    except git.InvalidGitRepositoryError:
        return None
    except git.NoSuchPathError:
        return None


def init_repo(root: Path):
    """git init the vault, write .gitignore, set a local identity if none, initial commit."""
    import git

    _git_env()
    repo = open_repo(root)
    if repo is None:
        repo = git.Repo.init(root)
    ensure_identity(repo)
    ignore = root / ".gitignore"
    if not ignore.exists():
        from memvault.files import atomic_write

        atomic_write(ignore, GITIGNORE)  # a half-written .gitignore would let .memvault/ into git
    if not repo.head.is_valid():
        clear_stale_index_lock(root)  # a first commit killed half-way
        repo.git.add("--", ".gitignore")
        if (root / "memvault.toml").exists():
            repo.git.add("--", "memvault.toml")
        repo.git.commit("-q", "--no-verify", "-m", "memvault init: new vault")
    return repo


def ensure_identity(repo) -> None:
    """Commit as the user if git knows them; else as memvault, in the vault's own config only."""
    import git

    try:
        repo.git.var("GIT_COMMITTER_IDENT")
        repo.git.var("GIT_AUTHOR_IDENT")
        return
    except git.GitCommandError:
        pass
    with repo.config_writer(config_level="repository") as config:
        config.set_value("user", "name", FALLBACK_NAME)
        config.set_value("user", "email", FALLBACK_EMAIL)


def clear_stale_index_lock(root: Path, older_than: float = 2.0) -> None:
    """Lock files left by a killed git (index.lock, HEAD.lock, a branch's ref lock) block every
    later commit.

    We only get here while holding the vault lock, so no other memvault process is inside git:
    a lock older than `older_than` seconds belongs to a dead process and goes. A younger one may
    be a git command the person runs in the vault right now, or a git killed a moment ago: it
    gets until it is that old to disappear, then goes too.
    """
    git_dir = root / ".git"
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "packed-refs.lock"]
    heads = git_dir / "refs" / "heads"
    if heads.is_dir():
        locks += sorted(heads.rglob("*.lock"))
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


def _git_cause(exc) -> str:
    """The line of git's stderr that says what went wrong (git ends with advice, not the cause)."""
    text = str(getattr(exc, "stderr", None) or exc).strip()
    if text.startswith("stderr:"):
        text = text[len("stderr:"):].strip().strip("'")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for prefix in ("fatal:", "error:"):
        found = next((line for line in lines if line.startswith(prefix)), None)
        if found:
            return found
    return lines[-1] if lines else str(exc)


@dataclass
class CommitRecord:
    subject: str
    added: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    replaced: list[tuple[str, str]] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)

    def message(self) -> str:
        trailers = [f"Memvault-Added: {i}" for i in self.added]
        trailers += [f"Memvault-Deleted: {i}" for i in self.deleted]
        trailers += [f"Memvault-Replaced: {old} -> {new}" for old, new in self.replaced]
        trailers += [f"Memvault-Edited: {i}" for i in self.edited]
        return self.subject + ("\n\n" + "\n".join(trailers) if trailers else "") + "\n"


def commit_all(root: Path, record: CommitRecord) -> str | None:
    """Stage every change in the vault and commit it; returns the sha, or None if nothing changed."""
    import git

    repo = open_repo(root)
    if repo is None:
        repo = init_repo(root)
    clear_stale_index_lock(root)
    try:
        repo.git.add("-A", "--", ".")
        if not repo.git.status("--porcelain", "--untracked-files=no"):
            return None
        subject, _, body = record.message().partition("\n\n")
        repo.git.commit("-q", "--no-verify", "-m", subject.strip(), *(["-m", body.strip()] if body.strip() else []))
    except git.GitCommandError as exc:
        raise MemvaultError(f"git commit in {root} failed: {_git_cause(exc)} "
                            "(the files are saved; the next memvault command commits them)") from None
    return repo.head.commit.hexsha

