"""One memory at a time: show, edit and rm, by id or unique id prefix (like git).

`edit` never lets a broken file into the vault: the editor works on a copy in
`.memvault/edit/`; the copy is validated (files.read_memory, same id, role and
conversation, non-empty text), and only then is the memory rewritten, re-indexed
and committed, under the vault lock. A rejected edit leaves the memory file as it
was (it is also in git) and keeps the rejected text in `.memvault/rejected/`,
which is never committed, so no typing is lost.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable, Sequence

from memvault.store import files
from memvault.errors import AlreadyDeleted, EditConflict, MemoryFileError, MemvaultError, NotFound, UsageError
from memvault.store.files import Memory
from memvault.store.vault import Vault

EDIT_DIR = "edit"
REJECTED_DIR = "rejected"


class EditRejected(MemvaultError):
    """An edit that did not validate; the memory is unchanged (exit 1)."""

    def __init__(self, message: str, saved: Path | None = None):
        super().__init__(message)
        self.saved = saved


def find(vault: Vault, id_or_prefix: str) -> Memory:
    """A memory (live preferred, else a tombstone) by id or unique prefix of at least 4 characters. One
    that no file holds any more says why, where git knows (history.taken_out: an undo, a removal)."""
    vault.require_existing()
    try:
        return vault.find(id_or_prefix)
    except NotFound as exc:
        from memvault.reading.history import taken_out

        why = taken_out(vault.root, id_or_prefix) if vault.settings.enable_git_versioning else None
        if why is None:
            raise
        raise NotFound(f"{exc}: {why}; `memvault log {id_or_prefix}` shows its history") from None


def find_live(vault: Vault, id_or_prefix: str) -> Memory:
    memory = find(vault, id_or_prefix)
    if memory.is_deleted:
        reason = memory.extra.get("deleted_reason") or "deleted"
        raise AlreadyDeleted(f"memory {memory.id} is deleted ({reason}): {vault.relative(memory.path)}")
    return memory


# -- show ------------------------------------------------------------------------------------

# -- rm --------------------------------------------------------------------------------------

def remove(vault: Vault, ids: Sequence[str], now: datetime | None = None, reason: str | None = None) -> list[Memory]:
    """Soft-delete memories (reason `user`) in one commit. Every id is resolved before anything
    is moved, so one bad id removes nothing. reason: the user's words, kept in each tombstone's
    front matter as `deleted_note`."""
    if not ids:
        raise UsageError("give at least one ID")
    note = check_note(reason)
    vault.require_existing()
    with vault.change("rm") as change:
        memories: dict[str, Memory] = {}
        for id_or_prefix in ids:
            memory = find_live(vault, id_or_prefix)
            memories.setdefault(memory.id, memory)
        by_conversation: dict[str, list[Memory]] = {}
        for memory in memories.values():
            change.soft_delete(memory, "user", now=now, note=note)
            by_conversation.setdefault(memory.conversation_id, []).append(memory)
        from memvault.learning import summaries

        for conversation, gone in by_conversation.items():  # the summary no longer states what is gone
            summaries.set_aside(change, conversation, gone, now=now)
    return list(memories.values())


def check_note(reason: str | None) -> str | None:
    """A removal's reason as it will be stored: stripped, None when blank; refused when it could
    not be stored as text or is longer than a reason."""
    if reason is None or not str(reason).strip():
        return None
    note = str(reason).strip()
    files.check_text(note, "the reason")
    if len(note) > files.MAX_NOTE_CHARS:
        raise UsageError(f"the reason is {len(note)} characters; at most {files.MAX_NOTE_CHARS}")
    return note


# -- edit ------------------------------------------------------------------------------------

@dataclass
class EditResult:
    memory: Memory
    changed: bool
    commit: str | None = None


def set_text(vault: Vault, id_or_prefix: str, text: str, now: datetime | None = None,
             expected: str | None = None) -> EditResult:
    """Give a live memory new text, its front matter kept (the library's `edit` without an editor).
    expected: the text the new one was written over (a form's, read earlier): when the memory holds
    another text now (a hand edit, another command), EditConflict and nothing is written."""
    memory = find_live(vault, id_or_prefix)
    text = text.strip()
    if not text:
        raise UsageError("the memory text is empty (use `memvault rm` to remove a memory)", params="text")
    files.check_text(text)
    _check_expected(vault, memory, expected)
    if text == memory.text:
        return EditResult(memory, changed=False)
    with vault.change("edit") as change:
        current = files.still_live(vault.root, memory.path, memory.id)
        if current is not None:  # what the lock was waited for may have changed it
            _check_expected(vault, current, expected if expected is not None else memory.text)
        if current is None:
            raise MemvaultError(f"{vault.relative(memory.path)}: the memory changed on disk meanwhile; "
                                "nothing was written")
        current.text = text
        current.extra["updated_at"] = files.format_time(now or files.utcnow())
        change.rewrite(current)
    return EditResult(current, changed=True, commit=change.commit_sha)


def _check_expected(vault: Vault, memory: Memory, expected: str | None) -> None:
    """Refuse an edit written over a text the memory no longer holds (line ends and the space around the
    text aside: a browser's form sends CRLF, and the text is stored stripped)."""
    if expected is None:
        return
    if expected.replace("\r\n", "\n").strip() != memory.text.replace("\r\n", "\n").strip():
        raise EditConflict(f"{vault.relative(memory.path)}: the memory changed since you read it (edited by hand "
                           "or by another command); nothing was written: read it again and redo the edit")


def editor_command(environ: dict[str, str] | None = None) -> list[str]:
    """$VISUAL, else $EDITOR, else vi; split like a shell would, so `code -w` works."""
    env = os.environ if environ is None else environ
    value = (env.get("VISUAL") or "").strip() or (env.get("EDITOR") or "").strip() or "vi"
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise UsageError(f"cannot parse the editor command {value!r}: {exc}") from None
    return argv or ["vi"]


def edit(vault: Vault, id_or_prefix: str, editor: Sequence[str] | None = None,
         retry: Callable[[str], bool] | None = None, now: datetime | None = None) -> EditResult:
    """Open the memory in an editor, validate, then rewrite + re-index + commit (`memvault edit`).

    retry(reason) is asked after a failed validation; when it returns True the editor
    opens again on the rejected text (the CLI asks on a terminal). Raises EditRejected
    when the edit is given up; the memory file is then untouched.
    """
    memory = find_live(vault, id_or_prefix)
    path = memory.path
    rel = vault.relative(path)
    original = path.read_bytes()
    argv = list(editor) if editor else editor_command()
    workdir = vault.sidecar / EDIT_DIR
    workdir.mkdir(parents=True, exist_ok=True)
    tempdir = Path(tempfile.mkdtemp(prefix=f"{memory.id[:8]}-", dir=workdir))
    work = tempdir / path.name  # same name: editors pick markdown mode from the extension
    try:
        work.write_bytes(original)
        while True:
            status = _run_editor(argv, work)
            edited = work.read_bytes() if work.is_file() else None
            if edited is None:
                raise MemvaultError(f"{rel}: the editor removed the copy being edited; the memory is unchanged")
            if status != 0:
                if edited == original:
                    raise MemvaultError(f"{rel}: editor {argv[0]} exited with status {status}; "
                                        "the memory is unchanged")
                raise _reject(vault, rel, work, f"editor {argv[0]} exited with status {status}")
            if edited == original:
                return EditResult(memory, changed=False)
            try:
                new = _validate(work, memory)
            except EditRejected as exc:
                if retry is not None and retry(str(exc)):
                    continue
                raise _reject(vault, rel, work, str(exc)) from None
            break
        with vault.change("edit") as change:
            current = path.read_bytes() if path.is_file() else None
            if current != original:
                raise _reject(vault, rel, work, "the memory changed on disk while it was being edited")
            new.path = path
            new.extra["updated_at"] = files.format_time(now or files.utcnow())
            change.rewrite(new)
        return EditResult(new, changed=True, commit=change.commit_sha)
    finally:
        shutil.rmtree(tempdir, ignore_errors=True)


def _run_editor(argv: list[str], path: Path) -> int:
    # `memvault edit ID --json | jq`: the editor's screen goes to the terminal on stderr, so that
    # stdout keeps only the result.
    stdout = 2 if not _isatty(1) and _isatty(2) else None
    try:
        # An argv list, never a shell: the file name is passed as one argument whatever it holds.
        return subprocess.run([*argv, str(path)], check=False, stdout=stdout).returncode
    except FileNotFoundError:
        raise MemvaultError(f"editor {argv[0]!r} not found; set $VISUAL or $EDITOR") from None
    except PermissionError:
        raise MemvaultError(f"editor {argv[0]!r} is not executable; set $VISUAL or $EDITOR") from None


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _validate(work: Path, before: Memory) -> Memory:
    try:
        new, adopted = files.read_memory(work)
    except MemoryFileError as exc:
        raise EditRejected(exc.reason) from None
    if adopted:
        has_header = work.read_text(encoding="utf-8", errors="replace").lstrip("\ufeff").startswith("---")
        raise EditRejected("the id is gone (ids cannot be edited)" if has_header
                           else "the front matter is gone (the file must start with a '---' block)")
    if new.id != before.id:
        raise EditRejected(f"the id changed (from {before.id} to {new.id}); ids cannot be edited")
    if new.role != before.role:
        raise EditRejected(f"the role changed (from {before.role} to {new.role}); "
                           "add a new memory with `memvault add --kind` instead")
    if new.conversation_id != before.conversation_id:
        raise EditRejected(f"the conversation_id changed (from {before.conversation_id!r} to "
                           f"{new.conversation_id!r}); add a new memory with `memvault add -c` instead")
    if not new.text.strip():
        raise EditRejected("the memory text is empty (use `memvault rm` to remove a memory)")
    for key in ("deleted_at", "deleted_reason", "replaced_by"):
        if key in new.extra and key not in before.extra:
            raise EditRejected(f"'{key}' belongs to deleted memories (use `memvault rm` to remove a memory)")
    return new


def _reject(vault: Vault, rel: str, work: Path, reason: str) -> EditRejected:
    """Keep the rejected text in .memvault/rejected/ and describe what happened, in one line."""
    target_dir = vault.sidecar / REJECTED_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    # Each rejected edit under its own name: <time>__<the file's name>, never overwriting an earlier one.
    target = target_dir / f"{files.file_stamp(files.utcnow())}__{work.name}"
    try:
        os.replace(work, target)
    except OSError:
        target = work
    return EditRejected(f"{rel}: edit rejected: {reason}; the memory is unchanged, "
                        f"your text is saved in {target}", saved=target)
