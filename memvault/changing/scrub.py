"""Secrets already in a vault's files and git history (docs/design.md, "Secrets"): `memvault scrub`, and
the check `memvault sync` makes before it pushes.

What git would send is read as git has it: the blobs a push adds to the remote (`git rev-list --objects
HEAD ^<remote>`), each scanned whole (secret_scan), so a secret in a hand edit committed with git, an
import from before the scan, or any commit of an older memvault is found by its file and line.

`scrub` replaces the secrets in the working files with placeholders, as one memvault commit (SCRUB events,
`Memvault-Scrubbed` trailers: `log` shows them), then lists where git history still holds them. Commits
not pushed yet can be rewritten (`rewrite_history`): each is made again with the same message, author and
dates and the cleaned files, the old history kept under a backup ref. A pushed commit is not rewritten:
every machine and the remote hold it, the next sync would merge it back, and the secret has left the
machine anyway, so it must be rotated.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from memvault.store import files, secret_scan
from memvault.errors import MemoryFileError, MemvaultError, UsageError

BACKUP_REFS = "refs/memvault/before-scrub"
# Blobs larger than a memory may be are not text memvault wrote: not read.
MAX_BLOB = files.MAX_MEMORY_BYTES
BATCH = 2000  # blobs read per `git cat-file --batch`


@dataclass(frozen=True)
class HistoryFinding:
    """A secret in git history (never the value): in a file as a commit holds it (where "file"), in a path's
    name (a folder named after a conversation id: "path"), or in a commit's message ("message")."""

    path: str  # the file, or the path whose name holds it ("" for a message)
    line: int  # in the file or the message (0 for a path)
    label: str
    blob: str  # the blob (a file), "" otherwise
    commit: str | None = None  # the commit that added that version of the file, that path, or that message
    pushed: bool = False  # reachable from a remote-tracking branch: it has left this machine
    where: str = "file"

    def __str__(self) -> str:
        commit = self.commit[:8] if self.commit else "?"
        if self.where == "message":
            return f"commit {commit} message, line {self.line}: {self.label}"
        if self.where == "path":
            return f"{self.path} (the name): {self.label}, commit {commit}"
        where = f", commit {self.commit[:8]}" if self.commit else ""
        return f"{self.path}:{self.line}: {self.label}{where}"

    def to_json(self) -> dict:
        return {"in": self.where, "path": self.path or None, "line": self.line, "secret": self.label,
                "commit": self.commit, "pushed": self.pushed}


def _git(root: Path, *args: str, input: bytes | None = None) -> str:
    from memvault.store import gitrepo

    try:
        return gitrepo.git_output(root, *args, input=input)
    except gitrepo.GitError as exc:
        raise MemvaultError(f"git {args[0]} in {root} failed: {exc.cause}") from None


def new_blobs(root: Path, *revisions: str) -> dict[str, str]:
    """{blob id: a path it is at} of the blobs reachable from these revisions (`^X` and `--not` as git
    takes them): what a push of them sends, or what a history holds."""
    out = _git(root, "-c", "core.quotePath=false", "rev-list", "--objects", "--filter=object:type=blob",
               *revisions, "--")
    blobs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, path = line.partition(" ")
        if path:
            blobs.setdefault(sha, path)
    return blobs


def scan_blobs(root: Path, blobs: dict[str, str]) -> list[HistoryFinding]:
    """The secrets in these blobs (text ones, at most a memory's size), by path and line."""
    from memvault.store import gitrepo

    found: list[HistoryFinding] = []
    if not blobs:
        return found
    ids = list(blobs)
    sizes = _sizes(root, ids)
    readable = [sha for sha in ids if 0 < sizes.get(sha, 0) <= MAX_BLOB]
    for start in range(0, len(readable), BATCH):
        chunk = readable[start:start + BATCH]
        for sha, data in gitrepo.read_blob_bytes(root, chunk).items():
            if data is None or b"\0" in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            lines = list(enumerate(text.split("\n"), 1))
            for item in secret_scan.find_in_lines(blobs[sha], lines):
                found.append(HistoryFinding(item.path, item.line, item.label, sha))
    return found


def _sizes(root: Path, ids: list[str]) -> dict[str, int]:
    out = _git(root, "cat-file", "--batch-check=%(objectname) %(objectsize)", input=("\n".join(ids) + "\n").encode())
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def _with_commits(root: Path, findings: list[HistoryFinding], head: str, pushed_blobs: set[str] | None = None
                  ) -> list[HistoryFinding]:
    """Each finding with the oldest commit of `head`'s history that has its blob, and whether it was pushed."""
    import dataclasses

    by_blob: dict[str, str | None] = {}
    for finding in findings:
        if finding.blob not in by_blob:
            out = _git(root, "log", "--format=%H", "--reverse", f"--find-object={finding.blob}", head, "--")
            by_blob[finding.blob] = out.split("\n", 1)[0].strip() or None
    return [dataclasses.replace(f, commit=by_blob[f.blob], pushed=pushed_blobs is not None and f.blob in pushed_blobs)
            for f in findings]


# Names memvault gives its own files (a time stamp and an id, a summary, a session): no secret in them.
_OWN_NAME = re.compile(r"\d{8}T\d{6,12}Z__[0-9a-f-]{36}\.md|summary\.md|session\.md|L\d+|facts|notes|decisions|turns|"
                       r"pending|summaries|deleted|entries|memvault\.toml|\.gitignore|\.gitattributes|README\.md")


def path_findings(root: Path, *revisions: str, blobs: dict[str, str] | None = None) -> list[HistoryFinding]:
    """The paths reachable from these revisions whose name holds a secret of a named kind (a folder named
    after a conversation id that is a token): the folders (`rev-list --objects --filter=object:type=tree`)
    and the files (blobs: new_blobs' answer for the same revisions, else asked), each name looked at once."""
    out = _git(root, "-c", "core.quotePath=false", "rev-list", "--objects", "--filter=object:type=tree",
               *revisions, "--")
    paths = {line.partition(" ")[2] for line in out.splitlines()}
    paths |= set((blobs if blobs is not None else new_blobs(root, *revisions)).values())
    bad: dict[str, list[str]] = {}
    found: list[HistoryFinding] = []
    for path in sorted(filter(None, paths)):
        name = path.rsplit("/", 1)[-1]
        if name not in bad:
            bad[name] = [] if _OWN_NAME.fullmatch(name) else [f.label for f in secret_scan.secrets_in_id(name)]
        for label in bad[name]:
            found.append(HistoryFinding(path, 0, label, "", where="path"))
    # a folder and what is under it: named once, by the folder
    named = {f.path for f in found}
    return [f for f in found if not any(f.path.startswith(other + "/") for other in named)]


# A trailer of memvault's that holds ids alone (Memvault-Added: <id>, -Replaced: <old> -> <new>, -Undoes: <commit>):
# nothing to look at, and a third of a first push's check was spent on them.
_ID_TRAILER = re.compile(r"Memvault-[A-Za-z]+: [0-9a-f-]{7,64}(?: -> [0-9a-f-]{7,64})?")


def message_findings(root: Path, *revisions: str) -> list[HistoryFinding]:
    """The secrets in the messages of the commits reachable from these revisions, named by commit and line."""
    out = _git(root, "log", "--format=%H%x00%B%x00", *revisions, "--")
    found: list[HistoryFinding] = []
    parts = out.split("\0")
    for sha, message in zip(parts[0::2], parts[1::2]):
        sha = sha.strip()
        if not sha or not message.strip():
            continue
        lines = [(number, line) for number, line in enumerate(message.strip("\n").split("\n"), 1)
                 if line.strip() and not _ID_TRAILER.fullmatch(line)]
        for item in secret_scan.find_in_lines("", lines):
            found.append(HistoryFinding("", item.line, item.label, "", commit=sha, where="message"))
    return found


def _path_commits(root: Path, findings: list[HistoryFinding], head: str) -> list[HistoryFinding]:
    """Each path finding with the oldest commit of `head`'s history that has the path."""
    import dataclasses

    out = []
    for finding in findings:
        if finding.where == "path":
            first = _git(root, "log", "--format=%H", "--reverse", head, "--", finding.path).split("\n", 1)[0].strip()
            finding = dataclasses.replace(finding, commit=first or None)
        out.append(finding)
    return out


# -- sync's check ---------------------------------------------------------------------------------------

def secrets_to_push(vault, head: str, theirs: str | None) -> list[HistoryFinding]:
    """The secrets in what a push of `head` over the remote's `theirs` would send: the files' new versions,
    the names of new paths and the commits' messages (issue 44: a hand commit's message held a token and
    was pushed); nothing when the vault's secret_scan is off."""
    if not secret_scan.enabled(vault):
        return []
    root = vault.root
    revisions = (head, *([f"^{theirs}"] if theirs else []))
    span = f"{theirs}..{head}" if theirs else head
    blobs = new_blobs(root, *revisions)
    findings = _with_commits(root, scan_blobs(root, blobs), span)
    findings += _path_commits(root, path_findings(root, *revisions, blobs=blobs), span)
    return findings + message_findings(root, *revisions)


def refusal(findings: list[HistoryFinding], remote: str) -> str:
    """Why sync did not push, naming each file and line, and what to do."""
    shown = "; ".join(str(f) for f in findings[:5]) + (f"; and {len(findings) - 5} more" if len(findings) > 5 else "")
    count = "a secret" if len(findings) == 1 else f"{len(findings)} secrets"
    return (f"not pushed to {remote}: the commits to push hold {count} ({shown}); they have not left this "
            "machine: `memvault scrub --rewrite-history` replaces them with placeholders in the files, the "
            "paths and the messages of the commits not pushed yet, then sync again; `memvault sync "
            "--push-secrets` pushes them as they are. What was pulled is merged here, nothing is lost")


# -- scrub ----------------------------------------------------------------------------------------------

@dataclass
class Rewrite:
    """What rewriting the commits not pushed yet did."""

    backup_ref: str
    old_head: str
    new_head: str
    commits: int  # commits made again
    cleaned: int  # file versions (blobs) cleaned

    def to_json(self) -> dict:
        return {"backup_ref": self.backup_ref, "old_head": self.old_head, "new_head": self.new_head,
                "commits": self.commits, "cleaned_versions": self.cleaned}


@dataclass
class ScrubResult:
    scrubbed: list = field(default_factory=list)  # secret_scan.Withheld: working files cleaned
    commit: str | None = None  # the scrub's commit
    left: list = field(default_factory=list)  # secret_scan.LineFinding: in files scrub does not rewrite
    history: list[HistoryFinding] = field(default_factory=list)  # still in git history (after any rewrite)
    rewrite: Rewrite | None = None
    remotes: bool = False  # the vault has remote-tracking branches

    @property
    def unpushed(self) -> list[HistoryFinding]:
        return [f for f in self.history if not f.pushed]

    @property
    def pushed(self) -> list[HistoryFinding]:
        return [f for f in self.history if f.pushed]

    def to_json(self) -> dict:
        return {"scrubbed": [w.to_json() for w in self.scrubbed], "commit": self.commit,
                "left_in_files": [{"path": f.path, "line": f.line, "secret": f.label} for f in self.left],
                "history": [f.to_json() for f in self.history],
                "rewrite": self.rewrite.to_json() if self.rewrite else None}


def scrub(vault, rewrite_history: bool = False) -> ScrubResult:
    """Replace the secrets of the vault's memory files (live and tombstones, hand edits included) with
    placeholders, as one commit; then find what git history still holds, and with rewrite_history
    make the commits not pushed yet again without them. Runs whatever the secret_scan setting says:
    the user asked for it."""
    from memvault.store import gitrepo

    vault.require_existing()
    result = ScrubResult()
    with vault.change("scrub") as change:
        for path in files.walk_entries(vault.root, include_deleted=True, placed_only=False):
            try:
                memory, _ = files.read_memory(path, vault.root)
            except MemoryFileError:
                result.left.extend(_raw_findings(vault, path))
                continue
            findings = secret_scan.withhold(vault, memory, force=True)
            moved = secret_scan.withhold_ids(memory)  # a conversation id that is a secret: its placeholder
            findings += moved
            if secret_scan.scan(files.render(memory)):  # in a key of memvault's own (an id, a hash)
                findings += secret_scan.withhold(vault, memory, force=True, every_key=True)
            if findings:
                change.scrub(memory, moved=any(f.field == "conversation_id" for f in moved))
                # said by scrub's own report, not by the door's notice
                result.scrubbed.append(secret_scan.keep(vault, change.command, memory, findings))
        change.title = _title(result.scrubbed)
    result.commit = change.commit_sha
    if not vault.settings.enable_git_versioning or not gitrepo.is_repo(vault.root):
        return result
    head = gitrepo.head_sha(vault.root)
    if head is None:
        return result
    result.remotes = bool(_git(vault.root, "for-each-ref", "--format=%(refname)", "refs/remotes").strip())
    result.history = _history(vault, head)
    if rewrite_history and result.unpushed:
        result.rewrite = _rewrite(vault, head, result.unpushed)
        result.history = _history(vault, result.rewrite.new_head)
    result.left.extend(_outside_entries(vault))  # after a rewrite: it may have cleaned them (_follow_the_new_head)
    return result


def _title(scrubbed: list) -> str:
    count = sum(len(w.labels) for w in scrubbed)
    return (f"{count} secret{'s' if count != 1 else ''} replaced by placeholders in {len(scrubbed)} "
            f"memor{'y' if len(scrubbed) == 1 else 'ies'}")


def _history(vault, head: str) -> list[HistoryFinding]:
    """Every secret HEAD's history holds: in files, in paths' names, in commit messages; each marked pushed
    when a remote-tracking branch reaches it."""
    import dataclasses

    root = vault.root
    blobs = new_blobs(root, head)
    files_found = scan_blobs(root, blobs)
    others = _path_commits(root, path_findings(root, head, blobs=blobs), head) + message_findings(root, head)
    if not files_found and not others:
        return []
    remotes = bool(_git(root, "for-each-ref", "refs/remotes").strip())
    pushed = set(new_blobs(root, "--remotes")) if remotes and files_found else set()
    pushed_commits = set(_git(root, "rev-list", "--remotes", "--").split()) if remotes and others else set()
    return _with_commits(root, files_found, head, pushed) + [
        dataclasses.replace(f, pushed=f.commit in pushed_commits) for f in others]


def _raw_findings(vault, path: Path) -> list:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    return secret_scan.find_in_lines(vault.relative(path), enumerate(text.split("\n"), 1))


def _outside_entries(vault) -> list:
    """Secrets in the files git tracks outside entries/ (memvault.toml, the user's own): named, not
    rewritten (they are not memories; only the user knows what they should say)."""
    out = _git(vault.root, "-c", "core.quotePath=false", "ls-files", "-z", "--", ".", f":!{files.ENTRIES}")
    found = []
    for rel in filter(None, out.split("\0")):
        path = vault.root / rel
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_BLOB:
            found.extend(_raw_findings(vault, path))
    return found


def clean_blob(text: str, path: str) -> str:
    """A file's text as scrub leaves it: a memory file parsed and written again with placeholders, its
    conversation id too, and memvault's own keys when the file still holds a secret (its YAML stays
    valid); any other file with the secrets replaced where they are."""
    if path.endswith(".md"):
        try:
            memory, _ = files.parse_memory(text, Path(path))
        except MemoryFileError:
            return secret_scan.redact(text)
        found = secret_scan.withhold(None, memory, force=True) + secret_scan.withhold_ids(memory)
        cleaned = files.render(memory) if found else text
        if secret_scan.scan(cleaned) and secret_scan.withhold(None, memory, force=True, every_key=True):
            cleaned = files.render(memory)  # in a key of memvault's own (an id, a hash): as a quoted string
        return cleaned
    return secret_scan.redact(text)


def clean_path(path: str) -> str:
    """A path with each part that holds a secret (a folder named after a conversation id) replaced by the
    folder of its placeholder."""
    return "/".join(secret_scan.clean_name(part) for part in path.split("/"))


def _rewrite(vault, head: str, unpushed: list[HistoryFinding]) -> Rewrite:
    """Make the commits not pushed yet again, oldest first, each with its message (its secrets replaced),
    author and dates, its files cleaned (clean_blob) and its paths whose names hold a secret moved
    (clean_path); the branch then points at the new head, the old one is kept under
    refs/memvault/before-scrub/<time>. A commit that comes out the same is kept as it is; when none
    changes, the branch, the backup refs and the reflog are left alone (commits == 0). Under the vault
    lock: nothing else writes meanwhile."""
    from memvault.store import gitrepo
    from memvault.store.lock import vault_lock

    root = vault.root
    branch = _git(root, "symbolic-ref", "-q", "HEAD").strip()
    if not branch:
        raise UsageError("rewriting history needs a branch checked out (HEAD is detached)")
    with vault_lock(vault.lock_path, timeout=vault.settings.lock_timeout, holder="scrub", on_wait=vault.notice):
        if gitrepo.head_sha(root) != head:
            raise MemvaultError("the vault's history moved while scrub ran; run it again")
        dirty = {f.blob: f.path for f in unpushed if f.where == "file"}
        cleaned = {sha: clean for sha, clean in _clean_blobs(root, dirty).items() if clean != sha}
        paths = sorted(set(dirty.values()) | {f.path for f in unpushed if f.where == "path"})
        messages = {f.commit for f in unpushed if f.where == "message"}
        rows = _git(root, "rev-list", "--reverse", "--topo-order", "--parents", head, "--not", "--remotes", "--")
        mapped: dict[str, str] = {}
        made = 0
        with tempfile.TemporaryDirectory(prefix="memvault-scrub-") as scratch:
            for row in rows.split("\n"):
                if not row.strip():
                    continue
                sha, *parents = row.split()
                new_parents = [mapped.get(p, p) for p in parents]
                tree = _clean_tree(root, sha, paths, cleaned, Path(scratch) / "index") if paths else None
                if tree is None and new_parents == parents and sha not in messages:
                    mapped[sha] = sha  # untouched and on untouched parents: the same commit
                    continue
                mapped[sha] = _commit_again(root, sha, tree, new_parents, clean_message=sha in messages)
                made += mapped[sha] != sha
        new_head = mapped.get(head, head)
        if new_head == head:  # nothing came out different: no new history, no backup of the old one
            return Rewrite("", head, head, 0, 0)
        stamp = files.file_stamp(files.utcnow())
        backup = f"{BACKUP_REFS}/{stamp}"
        _git(root, "update-ref", "-m", "memvault scrub: the history before --rewrite-history", backup, head)
        _git(root, "update-ref", "-m", "memvault scrub --rewrite-history", branch, new_head, head)
        _follow_the_new_head(root, head, new_head)
    return Rewrite(backup, head, new_head, made, len(cleaned))


def _follow_the_new_head(root: Path, old: str, new: str) -> None:
    """The files whose version at the head was cleaned (memory files scrub's own commit had cleaned already
    are the same; a file it does not rewrite, such as memvault.toml, is not): checked out as the new head
    has them, where the working file is still the old head's, so that the next commit does not put the
    secret back. One edited since is left as it is (scrub names it)."""
    from memvault.store import gitrepo

    changed = [p for p in _git(root, "-c", "core.quotePath=false", "diff", "--name-only", "-z", old, new, "--")
               .split("\0") if p]
    if not changed:
        return
    before = gitrepo.read_blob_bytes(root, [f"{old}:{path}" for path in changed])
    same = []
    for path in changed:
        try:
            if (root / path).read_bytes() == before[f"{old}:{path}"]:
                same.append(path)
        except OSError:
            continue
    if same:
        _git(root, "checkout", new, "--", *same)


def _clean_blobs(root: Path, dirty: dict[str, str]) -> dict[str, str]:
    """{dirty blob: its cleaned copy, written to git's object store}."""
    from memvault.store import gitrepo

    cleaned = {}
    for sha, data in gitrepo.read_blob_bytes(root, list(dirty)).items():
        if data is None:
            continue
        text = clean_blob(data.decode("utf-8"), dirty[sha])
        cleaned[sha] = _git(root, "hash-object", "-w", "--stdin", input=text.encode("utf-8")).strip()
    return cleaned


def _clean_tree(root: Path, commit: str, paths: list[str], cleaned: dict[str, str], index: Path) -> str | None:
    """The commit's tree with every dirty blob under these paths replaced by its cleaned copy and every path
    whose name holds a secret moved (clean_path); None when nothing in it changes."""
    from memvault.store import gitrepo

    listing = _git(root, "-c", "core.quotePath=false", "ls-tree", "-r", "-z", commit, "--", *paths)
    updates = []
    for entry in filter(None, listing.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, _, sha = meta.split(" ")
        new_path, new_sha = clean_path(path), cleaned.get(sha, sha)
        if new_path != path:
            updates.append(f"0 {'0' * len(sha)}\t{path}")
        if new_path != path or new_sha != sha:
            updates.append(f"{mode} {new_sha}\t{new_path}")
    if not updates:
        return None
    env = {"GIT_INDEX_FILE": str(index)}
    for args, stdin in ((("read-tree", f"{commit}^{{tree}}"), None),
                        (("update-index", "-z", "--index-info"), ("\0".join(updates) + "\0").encode("utf-8")),
                        (("write-tree",), None)):
        status, out, err = gitrepo._run(root, *args, input=stdin, env=env)
        if status != 0:
            raise MemvaultError(f"git {args[0]} in {root} failed while rewriting {commit[:8]}: {err.strip()}")
    tree = out.decode().strip()
    return None if tree == _git(root, "rev-parse", f"{commit}^{{tree}}").strip() else tree


def _commit_again(root: Path, sha: str, tree: str | None, parents: list[str], clean_message: bool = False) -> str:
    """The commit made again with another tree and/or parents: its message (clean_message: with its secrets
    replaced by placeholders), author and committer as they were."""
    from memvault.store import gitrepo

    fields = _git(root, "log", "-1", "--format=%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%T%x00%B", sha)
    author, author_mail, author_date, committer, committer_mail, committer_date, old_tree, message = \
        fields.split("\0", 7)
    env = {**os.environ, "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": author_mail, "GIT_AUTHOR_DATE": author_date,
           "GIT_COMMITTER_NAME": committer, "GIT_COMMITTER_EMAIL": committer_mail,
           "GIT_COMMITTER_DATE": committer_date}
    if clean_message:
        message = secret_scan.redact(message)
    args = ["commit-tree", tree or old_tree]
    for parent in parents:
        args += ["-p", parent]
    status, out, err = gitrepo._run(root, *args, input=message.rstrip("\n").encode("utf-8") + b"\n", env=env)
    if status != 0:
        raise MemvaultError(f"git commit-tree in {root} failed while rewriting {sha[:8]}: {err.strip()}")
    return out.decode().strip()
