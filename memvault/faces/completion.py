"""Cheap completion of conversation names and memory ids, for shell TAB completion.

Used as typer `autocompletion=` callbacks. Only the standard library is imported:
no lancedb, fastembed, litellm or git.
Nothing here parses memory files except, for a folder whose name is a hashed
slug, the `conversation_id:` line of one file; ids come from file names.

The generated shell scripts in completions/ do the same listing in shell, so
that TAB never has to start Python.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ENTRIES = "entries"
DELETED = "deleted"
# <ts>__<uuid>.md, as written by memvault (files.relative_path_for)
_ID_FILE = re.compile(r"^\d{8}T\d{12}Z__([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.md$")
# files.conversation_slug for an id that is not a plain name: "<readable>-<10 hex digits of sha256>"
_HASHED_SLUG = re.compile(r"-[0-9a-f]{10}$")
_CONVERSATION_LINE = re.compile(r"^conversation_id:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def vault_root(ctx=None) -> Path:
    """--vault from the command line being completed, else MEMVAULT_DIR, else the XDG default."""
    if ctx is not None:
        value = ctx.find_root().params.get("vault")
        if value:
            return Path(os.path.expanduser(str(value)))
    from memvault.store.config import default_vault_path  # light: tomllib and dataclasses

    return default_vault_path()


def conversation_names(root: Path) -> list[str]:
    """Conversation ids that have a folder under entries/, sorted.

    A folder is named after its conversation id when the id is a plain name; for
    other ids the folder is a hashed slug, and the id is read from one file in it.
    """
    names: set[str] = set()
    try:
        folders = [e for e in os.scandir(root / ENTRIES) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for folder in folders:
        if folder.name.startswith("."):
            continue
        if _HASHED_SLUG.search(folder.name):
            found = _conversation_in(Path(folder.path))
            if found:
                names.add(found)
            continue
        names.add(folder.name)
    return sorted(names)


def _conversation_in(folder: Path) -> str | None:
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != DELETED)
        for name in sorted(files):
            if name.endswith(".md") and not name.startswith("."):
                try:
                    with open(os.path.join(here, name), encoding="utf-8", errors="replace") as handle:
                        head = handle.read(4096)
                except OSError:
                    continue
                match = _CONVERSATION_LINE.search(head.split("\n---", 1)[0])
                if match:
                    return _yaml_scalar(match.group(1))
    return None


def _yaml_scalar(value: str) -> str:
    if value[:1] in ("'", '"'):
        import yaml  # only for quoted ids, which are rare

        try:
            loaded = yaml.safe_load(value)
            return str(loaded)
        except yaml.YAMLError:
            return value.strip("'\"")
    return value


def memory_ids(root: Path, include_deleted: bool = False) -> list[str]:
    """Ids of memory files, from their names (<ts>__<uuid>.md), newest first."""
    found: list[tuple[str, str]] = []
    base = root / ENTRIES
    for here, dirs, files in os.walk(base):
        depth = len(Path(here).relative_to(base).parts)
        dirs[:] = [d for d in dirs if not d.startswith(".") and (include_deleted or depth != 1 or d != DELETED)]
        for name in files:
            match = _ID_FILE.match(name)
            if match:
                found.append((name, match.group(1).lower()))
    found.sort(reverse=True)
    seen: set[str] = set()
    ids = []
    for _name, memory_id in found:
        if memory_id not in seen:
            seen.add(memory_id)
            ids.append(memory_id)
    return ids


# -- typer autocompletion callbacks --------------------------------------------------------
# `ctx` is left unannotated on purpose: typer finds it by name (it vendors its own click).

def complete_conversation(ctx, incomplete: str) -> list[str]:
    return [n for n in conversation_names(vault_root(ctx)) if n.startswith(incomplete)]


def complete_memory_id(ctx, incomplete: str) -> list[str]:
    """Any memory, tombstones included (show, log)."""
    needle = incomplete.lower()
    return [i for i in memory_ids(vault_root(ctx), include_deleted=True) if i.startswith(needle)]


def complete_live_memory_id(ctx, incomplete: str) -> list[str]:
    """Live memories only (edit, rm)."""
    needle = incomplete.lower()
    return [i for i in memory_ids(vault_root(ctx)) if i.startswith(needle)]
