"""memvault: long-term memory for LLM work in a git-versioned folder of markdown files.

    import memvault

    vault = memvault.open_vault()          # $MEMVAULT_DIR, else ~/.local/share/memvault
    vault.add("My wife is Anne")
    for result in vault.search("what is my wife's name").results:
        print(result.score, result.text)

`open_vault` returns a `Memvault` (memvault/api.py), with one method per operation: add,
add_jsonl, add_extracted, search, search_many, chat, ask, session, clear_session, reconcile,
summarize, reindex, check, watch, sync, log, get, recent, edit, remove, models, warm; `clone_vault`
copies a vault from a git remote. Errors are `MemvaultError`s.
Importing this package is cheap; models, the index and the LLM client load on first use.
"""

import os as _os

from memvault.errors import AlreadyDeleted, LLMError, MemvaultError, NotFound, UsageError

__version__ = "0.1.0"
__all__ = ["AlreadyDeleted", "LLMError", "Memvault", "MemvaultError", "NotFound", "UsageError", "clone_vault", "open_vault",
           "__version__"]

# onnxruntime (under fastembed) and huggingface_hub phone home unless told not to;
# memvault makes no network call the user did not configure. Explicit user values win.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
_os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
_os.environ.setdefault("DO_NOT_TRACK", "1")


def open_vault(path=None, **options):
    """Open a vault: see `memvault.api.open_vault`."""
    from memvault.api import open_vault as _open_vault

    return _open_vault(path, **options)


def clone_vault(url, path=None, **options):
    """Clone a vault from a git remote and build its index: see `memvault.api.clone_vault`."""
    from memvault.api import clone_vault as _clone_vault

    return _clone_vault(url, path, **options)


def __getattr__(name: str):
    if name == "Memvault":  # PEP 562: the API module loads when it is first asked for
        from memvault.api import Memvault

        return Memvault
    raise AttributeError(f"module 'memvault' has no attribute {name!r}")
