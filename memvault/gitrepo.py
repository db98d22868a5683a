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
        ignore.write_text(GITIGNORE, encoding="utf-8")
    if not repo.head.is_valid():
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
    """A git index.lock left by a killed process blocks every later commit.

    We only get here while holding the vault lock, so no other memvault process is
    inside git; a lock this old belongs to a dead process.
    """
    lock = root / ".git" / "index.lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age > older_than:
        lock.unlink(missing_ok=True)


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
        detail = (exc.stderr or str(exc)).strip().splitlines()
        raise MemvaultError(f"git commit in {root} failed: {detail[-1] if detail else exc}") from None
    return repo.head.commit.hexsha

