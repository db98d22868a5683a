"""A command line read before anything is imported (the warm path, warm.py, and the hook process,
hook_client.py, both read it; a module of their own so that neither imports the other). Standard library
and store/config.py only.
"""

from __future__ import annotations

import os
from pathlib import Path

_GLOBAL_FLAGS = {"--json", "-q", "--quiet", "-v", "--verbose"}


def vault_root(argv: list[str]) -> Path | None:
    """The vault the command names (--vault before the command, else $MEMVAULT_DIR, else the
    default), or None when the arguments before the command are not the plain global options."""
    from memvault.store.config import default_vault_path

    vault = None
    position = 0
    while position < len(argv) and argv[position].startswith("-"):
        arg = argv[position]
        if arg == "--vault" and position + 1 < len(argv):
            vault = argv[position + 1]
            position += 2
            continue
        if arg.startswith("--vault="):
            vault = arg.split("=", 1)[1]
        elif arg not in _GLOBAL_FLAGS:
            return None  # --help, --version, or an option this does not know: cold
        position += 1
    if position >= len(argv):
        return None
    root = Path(vault).expanduser() if vault is not None else default_vault_path()
    return Path(os.path.abspath(root))


def command_of(argv: list[str]) -> str | None:
    position = 0
    while position < len(argv) and argv[position].startswith("-"):
        position += 2 if argv[position] == "--vault" else 1
    return argv[position] if position < len(argv) else None
