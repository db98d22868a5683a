"""The LanceDB sidecar under .memvault/: disposable, rebuilt from the files by content hash.

Sync (docs/design.md, "The index"): look at the files git says may differ from what the record
(state.py) holds since the commit it is synced to (every file under entries/ without git),
compare size, mtime and ctime with the record, hash only what changed, parse only changed
bytes, embed only new or changed text in batches, drop rows of vanished files, and write the
record in one transaction *last*, so a sync killed at any point is finished by the next one
(rows are always replaced by path, which makes redoing a half-done sync harmless).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import stat as stat_module
import sys
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from memvault.store import files
from memvault.store.row_filter import _like_escape, _sql_str
from memvault.store.vectors import row_dicts
from memvault.errors import InvalidConversationId, MemoryFileError, UsageError
from memvault.store.files import Memory

TABLE = "memories"
STATE_VERSION = 1
EMBED_BATCH = 256
# Rows per table.add: each add makes a fragment and a table version. As many as a bulk add's batch
# (vault.INDEX_BATCH), so that 100,000 memories make 13 fragments, under COMPACT_FRAGMENTS: no
# compaction after them (at 100,000 rows it held 200 MB more at the end of the add).
ADD_ROWS = 32 * EMBED_BATCH
# More rows than this, or 1% of the rows, outside the BM25 index (searched by a scan meanwhile) and
# the upkeep takes them in (optimize); see _bm25_behind.
FTS_UNINDEXED_MAX = 1000
# Every `add` appends a small fragment to the table; searches slow down with their number (1,000
# one-row fragments: 0.4 s a search instead of 0.02 s), so past this many the sync compacts.
COMPACT_FRAGMENTS = 16
# What a compaction rewrites (Index._compact, docs/design.md "The index"): the appends since the last one,
# merged among themselves, not the big fragments before them. Walking from the newest fragment back, the
# first one that holds at least SETTLED_RATIO times the rows of all those after it (and SETTLED_ROWS
# rows) is settled: it and every one before it stay as they are, unless they hold deleted rows (those
# are rewritten without them: an old version of a row, a secret withheld since, is not kept in a data
# file past the compaction). So fragment sizes fall by at least 4x towards the end (a handful of
# fragments), and a big one is rewritten once the rows after it reach a quarter of it: an 11,000-row
# table's 16 two-row appends merged in 20 ms instead of the table rewritten (bench/README.md, "Session 8").
# Past KEEP_FRAGMENTS settled ones (a bulk add's 8,192-row batches) everything is compacted, as before.
SETTLED_RATIO = 4
SETTLED_ROWS = 256
KEEP_FRAGMENTS = COMPACT_FRAGMENTS // 2
# When git names more files than this as possibly changed that are not (touched, copied: its stat
# data is stale), the sync has git renew its stat data, so that the next sync is not told again.
GIT_REFRESH_AFTER = 200
RACY_NS = 1_000_000_000  # see _stat_fields
# LanceDB's caches of index files and of table metadata, per connection. Its defaults (6 GiB and 1
# GiB) let a long-lived process (serve, mcp, watch) keep the entries of every table version it has
# read: each write makes a version and each `optimize` new index files (`memvault serve`: +31 MB of
# cache over 1,000 requests, and rising). What searches use is far smaller (Session.size_bytes after
# 300 searches: 1.1 MB at 10,000 memories, 9 MB at 100,000: 2.5 of index, 6.5 of metadata); the least
# recently used entries beyond these bounds go.
INDEX_CACHE_BYTES = 8 << 20
METADATA_CACHE_BYTES = 8 << 20
# Bitmap indexes on the filter columns, from this many rows on (Index.ensure_filter_indexes), and
# a B-tree on the creation time that --since/--until and a query's own time range filter by.
FILTER_INDEX_ROWS = 5000
FILTER_INDEX_COLUMNS = ("role", "conversation_id")
TIME_INDEX_COLUMN = "created_us"
# A B-tree on the path too, which every write looks rows up by (a changed file's merge_insert, the
# check for rows a sync cut short left): without it each looked through every row's path (issue 44:
# 5 ms of CPU per add at 10,000 rows, ~50 ms at 100,000; 1.6 ms with it).
PATH_INDEX_COLUMN = "path"
# The table versions `optimize` keeps (each write makes one; a compaction's rewritten data and index
# files stay with them): LanceDB's default of 7 days grew a 10,000-memory vault's index (26 MB) to
# 5.3 GB over a day of a server's writes. A reader holding an older version (a search in flight in
# another process) needs its files for as long as the read lasts; a handle that fell behind finds
# the newest version again (Index.table_gone, Memvault._run_search).
KEEP_VERSIONS_SECONDS = 600
# The BM25 index on index_text: words lower-cased, accents folded, English stop words dropped, stemmed.
FTS_COLUMN = "index_text"
# What the BM25 index's files were when memvault wrote them (Index.record_fts), beside the table.
FTS_SUMS = "fts-checksums.json"
# The relative times of a memory's words, resolved against its date (store/relative_times.py, issue 45):
# the expressions as JSON and the whole stretch they name, in UTC microseconds [from, to), which the
# time-range candidates read (row_filter.RowFilter.time_range).
TOLD_COLUMNS = ("told", "told_from_us", "told_to_us")
# The answer of changed_paths kept for one read (Index.one_status): {(root, record's commit, HEAD,
# Vault.writes): the paths}, or None outside such a read.
_STATUS: ContextVar[dict | None] = ContextVar("memvault_one_status", default=None)


def TOLD_FIELDS(pa):  # noqa: N802 (a constant of the schema, built where pyarrow is loaded)
    return [("told", pa.string()), ("told_from_us", pa.int64()), ("told_to_us", pa.int64())]
FTS_OPTIONS = {"base_tokenizer": "simple", "language": "English", "with_position": False, "stem": True,
               "remove_stop_words": True, "lower_case": True, "ascii_folding": True}


# lancedb imports lance-namespace at start, and with it lance-namespace's generated REST client, though
# a local folder never uses either: the client's package __init__ loads nine API modules (0.65 s
# of a 1.2 s `import lancedb`, deferred since issue 20), and lance_namespace's own __init__ ~150 pydantic
# models of requests and responses (0.55 s of the 1.55 s left; session 10) for the names lancedb takes
# from it at import but uses only with a namespace or a remote connection. `import_lancedb` loads those
# three packages without running their __init__: lancedb's own imports of single model modules load
# just those, and a name lancedb takes from lance_namespace meanwhile is a `_Later`, the real object on
# first use. Anything else asking one of the packages for a name runs its __init__ first, so nothing is
# lost, only deferred; and should a lancedb not import with that, it is imported again the plain way.
_REST_CLIENT = "lance_namespace_urllib3_client"
_REST_MODELS = _REST_CLIENT + ".models"
_NAMESPACE = "lance_namespace"
_LENDING = False  # import_lancedb is importing lancedb with lance_namespace's __init__ deferred
_IMPORTING = threading.Lock()
_WHOLE_SAID = False  # Index._optimize_whole said why, once per process


def table_folder(index_dir: Path) -> Path:
    """The LanceDB table's own folder in the index folder (its data, manifests, indexes)."""
    return index_dir / f"{TABLE}.lance"


def import_lancedb():
    """`import lancedb`, without lance-namespace's REST client (API modules, models) until someone needs it."""
    with _IMPORTING:  # a second thread waits for the first one's import, then finds lancedb imported
        if not {"lancedb", _NAMESPACE, _REST_CLIENT} & sys.modules.keys():  # else as it is
            return _import_lancedb_deferring()
    import lancedb

    return lancedb


def _import_lancedb_deferring():
    global _LENDING
    deferred = {}
    for name in (_REST_CLIENT, _REST_MODELS, _NAMESPACE):
        try:
            deferred[name] = _defer_package_init(name, lend=name == _NAMESPACE)
        except Exception:  # an unexpected layout (it puts nothing in sys.modules then): imported as usual
            deferred[name] = False
    _LENDING = deferred[_NAMESPACE]
    try:
        import lancedb
    except Exception:
        if not _LENDING:
            raise
        # a lancedb that uses a lent name at import in a way _Later does not pass on: lance_namespace
        # imported as it is (the REST client's package stays deferred: it has only ever had to be asked)
        _LENDING = False
        _forget_modules(["lancedb", _NAMESPACE])
        import lancedb
    finally:
        _LENDING = False
    return lancedb


def _bounded_caches(lancedb) -> dict:
    """connect()'s session argument with caches of INDEX_CACHE_BYTES and METADATA_CACHE_BYTES (none
    for a lancedb without sessions: its own caches then)."""
    if not hasattr(lancedb, "Session"):
        return {}
    return {"session": lancedb.Session(index_cache_size_bytes=INDEX_CACHE_BYTES,
                                       metadata_cache_size_bytes=METADATA_CACHE_BYTES)}


def _defer_package_init(name: str, lend: bool = False) -> bool:
    """Put package `name` in sys.modules without running its __init__ (its submodules import as usual),
    which runs the first time anyone asks the package for a name it lacks (PEP 562). With `lend`, while
    import_lancedb imports lancedb, a name the __init__ defines is answered by a `_Later` instead."""
    spec = importlib.util.find_spec(name)  # imports the parent package of a submodule
    if name in sys.modules or spec is None or spec.loader is None or not spec.submodule_search_locations:
        return False
    names = _defined_names(spec.origin) if lend else frozenset()
    package = importlib.util.module_from_spec(spec)  # __path__ set: submodules import as usual
    lock = threading.RLock()  # one thread runs the __init__; another asking meanwhile waits for it
    initialised = False
    lent: dict[str, _Later] = {}

    def initialise() -> None:
        nonlocal initialised
        with lock:
            if not initialised:
                initialised = True
                spec.loader.exec_module(package)  # the real __init__, into this same module object

    def __getattr__(attr: str):  # PEP 562: only called for names the module does not have yet
        if _LENDING and attr in names and not initialised and not attr.startswith("__"):
            return lent.setdefault(attr, _Later(package, attr, initialise))
        initialise()
        if attr in vars(package):
            return vars(package)[attr]
        hook = vars(package).get("__getattr__")
        if hook is not None and hook is not __getattr__:  # the package's own (a lazy lance_namespace)
            return hook(attr)
        # as a package without this __getattr__ says it, also while its own __init__ runs
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    package.__getattr__ = __getattr__
    sys.modules[name] = package
    return True


def _defined_names(path: str | None) -> frozenset[str]:
    """The names a module's top level binds (defs, classes, assignments, imports), read without running it."""
    import ast

    if not path:
        raise ValueError("no source")
    names = set()
    for node in ast.parse(Path(path).read_bytes()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    names.discard("*")
    return frozenset(names)


def _forget_modules(packages: list[str]) -> None:
    """Drop these packages' Python modules (not compiled extensions, which load only once per process)
    from sys.modules, so that the next import runs them afresh."""
    compiled = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for module_name in [m for m in sys.modules if m.split(".")[0] in packages]:
        origin = getattr(getattr(sys.modules[module_name], "__spec__", None), "origin", None) or ""
        if not origin.endswith(compiled):
            sys.modules.pop(module_name, None)


class _Later:
    """A name lancedb took from lance_namespace at import: the real object (a class, a function) on first
    use, which is passed on to it. lancedb uses these only with a namespace or a remote connection.
    Dunder names are not passed on: typing and introspection ask for them (Optional[...] asks for
    __typing_subst__) and would load what this defers; a call, an isinstance, a subclass do load it."""

    __slots__ = ("_package", "_name", "_initialise", "_real")

    def __init__(self, package, name: str, initialise: Callable[[], None]):
        self._package, self._name, self._initialise, self._real = package, name, initialise, None

    def _get(self):
        if self._real is None:
            self._initialise()
            self._real = getattr(self._package, self._name)
        return self._real

    def __call__(self, *args, **kwargs):
        return self._get()(*args, **kwargs)

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return getattr(self._get(), attr)

    def __instancecheck__(self, obj) -> bool:
        return isinstance(obj, self._get())

    def __subclasscheck__(self, cls) -> bool:
        return issubclass(cls, self._get())

    def __mro_entries__(self, bases):
        return (self._get(),)

    def __repr__(self) -> str:
        return f"<{self._package.__name__}.{self._name}, loaded on first use>"


@dataclass
class SyncReport:
    added: list[str] = field(default_factory=list)  # relative paths
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[MemoryFileError] = field(default_factory=list)
    adopted: list[Memory] = field(default_factory=list)
    rebuilt: str | None = None  # why the whole index was rebuilt, if it was
    ids: dict[str, str] = field(default_factory=dict)  # relative path -> memory id, for what changed
    # Synced by git: the files whose indexed content is not HEAD's, with their blob at HEAD ("" for
    # none): what reindex commits as hand edits. None when git was not asked.
    unlike_head: dict[str, str] | None = None
    committed: list[str] = field(default_factory=list)  # reindex: the hand edits it committed (relative paths)
    commit: str | None = None  # ... and the commit it made of them
    # check: the files a search read and indexed as they are, edited by hand and not taken in (scanned for
    # secrets, committed) yet, that hold a secret: {path: what each secret is (labels, never values)}; until
    # `memvault reindex` withholds them (issue 44)
    unscrubbed: dict[str, list[str]] = field(default_factory=dict)
    # reindex: the markdown files it moved into a kind folder (Sync.place), (from, to), relative
    moved: list[tuple[str, str]] = field(default_factory=list)
    # reindex, reindex --check: what is wrong with the BM25 index's files (Index.fts_damage, fts_probe),
    # and whether this sync made it anew (reindex does; --check writes nothing)
    damaged: str | None = None
    repaired: bool = False

    @property
    def drift(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.rebuilt)

    @property
    def in_step(self) -> bool:
        """The one answer to "is the index in step with the files" (`reindex --check`'s exit code,
        `stats`, serve's /v1/stats, MCP's vault_stats): nothing to add, change or remove, no rebuild
        due, no file left out (unreadable, or claiming an id another file has), no secret in a file a
        search read as it is and reindex has not taken in yet, and no damaged full-text index."""
        return not (self.drift or self.skipped or self.unscrubbed or (self.damaged and not self.repaired))

    def out_of_step(self) -> str:
        """What keeps the index out of step, in words ("1 changed, 2 skipped"), "" when in step."""
        parts = [f"{len(paths)} {label}" for label, paths in (("added", self.added), ("changed", self.changed),
                                                                ("removed", self.removed), ("skipped", self.skipped),
                                                                ("holding a secret, not taken in", self.unscrubbed))
                 if paths]
        damaged = [f"a damaged full-text index ({self.damaged})"] if self.damaged and not self.repaired else []
        return ", ".join(parts + ([f"a rebuild ({self.rebuilt})"] if self.rebuilt else []) + damaged)

    def summary(self) -> str:
        line = (f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, "
                f"{self.unchanged} unchanged, {len(self.skipped)} skipped")
        if self.repaired:
            line += f"; rebuilt the damaged full-text index ({self.damaged})"
        if self.committed:
            count = len(self.committed)
            line += f"; committed {count} hand edit{'s' if count != 1 else ''}" + \
                (f" ({self.commit[:8]})" if self.commit else "")
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "added": self.added, "changed": self.changed, "removed": self.removed, "unchanged": self.unchanged,
            "skipped": [{"path": str(e.path), "reason": e.reason} for e in self.skipped],
            "adopted": [str(m.path) for m in self.adopted], "rebuilt": self.rebuilt,
            "committed": self.committed, "commit": self.commit,
            "unscrubbed": [{"path": path, "secrets": labels} for path, labels in self.unscrubbed.items()],
            "moved": [{"from": old, "to": new} for old, new in self.moved],
            "damaged": self.damaged, "repaired": self.repaired,
        }


# -- handles kept between commands (docs/design.md, "The agent") --------------------------------------
class _Kept:
    """A LanceDB connection and its open table, kept by a process that opens the vault anew for each command
    (the agent, keep_handles): its caches of index files and metadata stay warm, and no command pays for a
    connection (a search reopening them read its index files again: ~60 ms of CPU a search at 10,000 memories).
    The table folder is held open (fd), so that its inode is not given to another folder while kept: a folder
    rebuilt or removed and made again by another process is another inode, and the handle is dropped."""

    def __init__(self, db, table, folder: Path):
        self.db, self.table = db, table
        self.fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        self.filter_indexes_checked = False
        self.range_cache: dict = {}
        self.dense_copy = None

    def current(self, folder: Path) -> bool:
        """Whether `folder` is still the table folder this was kept for."""
        try:
            now, then = os.stat(folder), os.fstat(self.fd)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


_kept: dict[str, _Kept] | None = None  # index folder -> kept handles; None: not kept (every cold command)


def keep_handles() -> None:
    """From now on, this process keeps each index's LanceDB connection and table between the Index objects
    it makes (the agent, which opens the vault anew for each command). Each new Index takes them at the
    table's latest version, as a table opened then would be; a sync still looks at the files first."""
    global _kept
    if _kept is None:
        _kept = {}


def _keep(index: "Index") -> None:
    folder = table_folder(index.dir)
    _forget(index.dir)
    try:
        kept = _Kept(index._db, index._table, folder)
    except OSError:
        return  # not kept: the next command opens the table again
    kept.filter_indexes_checked = index._filter_indexes_checked
    kept.range_cache = index.range_cache
    kept.dense_copy = index.dense_copy
    _kept[str(index.dir)] = kept


def _forget(folder: Path) -> None:
    kept = _kept.pop(str(folder), None) if _kept is not None else None
    if kept is not None:
        kept.close()


def _dense_copy():
    """A DenseCopy for a long-lived process (native_memory.long_lived), else None."""
    from memvault.store.native_memory import long_lived

    if not long_lived():
        return None
    from memvault.store.dense_copy import DenseCopy

    return DenseCopy()


class Index:
    """The index of one vault. Heavy modules are imported only when it is used."""

    def __init__(self, vault, notice: Callable[[str], None] | None = None):
        self.vault = vault
        self.root: Path = vault.root
        self.dir = vault.sidecar / "index"
        self.state_path = vault.sidecar / "state.db"
        self.legacy_state_path = vault.sidecar / "state.json"  # before state.db (carried over once)
        self.notice = notice or (lambda message: None)
        self._state = None
        self._object_format = "sha1"
        self._touched = False  # written since the last maintain()
        self._versions_seen = None  # the table's version folder at the last refresh (_versions_stamp)
        self._filter_indexes_checked = False
        self._db = None
        self._table = None
        self._embedder = None
        # The read path's rows of a time range, per table version (retrieval._in_range_rows): a
        # long-lived process asked about "March" again reads them once.
        self.range_cache: dict = {}
        # A long-lived process's copy of the table for the dense retrievers (dense_copy.py); None in a cold command.
        self.dense_copy = _dense_copy()
        self._fts_sums: tuple | None = None  # the BM25 record as last read, with its file's stat (fts_damage)

    # -- model -----------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            from memvault.store.models import get_embedder

            self._embedder = get_embedder(self.vault.settings.embedding_model)
        return self._embedder

    def model_info(self) -> dict[str, Any]:
        """The embedding model's name, dimension and fingerprint; loads the model only when they
        are not known up front (so a sync with nothing to embed never loads it)."""
        if self._embedder is None:
            from memvault.store.models import embedder_identity

            known = embedder_identity(self.vault.settings.embedding_model)
            if known is not None:
                return known
        e = self.embedder
        return {"name": e.name, "dim": e.dim, "fingerprint": e.fingerprint}

    # -- state -----------------------------------------------------------------
    @property
    def state(self):
        """The record of the files the index has read (state.py), opened once."""
        if self._state is None:
            from memvault.store.state import State

            self._state = State(self.state_path)
        return self._state

    def _header(self) -> dict[str, Any] | None:
        """The record's header, None when there is none (or it is damaged: said, then rebuilt). A
        state.json of an earlier memvault is carried over first."""
        from memvault.store import state as state_module

        if not self.state_path.exists() and self.legacy_state_path.exists():
            try:
                state_module.import_json(self.state_path, self.legacy_state_path, self.notice)
            except OSError:
                pass  # read-only: the index is read as if it had no record
        try:
            return self.state.header()
        except FileNotFoundError:
            return None
        except state_module.Unreadable as exc:
            self.notice(f"memvault: {exc}; rebuilding the index")
            self.state.close()
            return None

    def state_summary(self) -> dict[str, Any] | None:
        """{"files": live files recorded, "model": the model's record}, or None without a record."""
        header = self._header()
        if header is None:
            return None
        return {"files": self.state.count(), "model": header["model"]}

    def owner_of(self, memory_id: str) -> str | None:
        """The vault-relative path of the live file the record gives this id (None: none, or no record)."""
        from memvault.store.state import owner_lookup

        with owner_lookup(self.state_path) as owner_of:
            return owner_of(memory_id)

    def remember_notice(self, key: str, message: str) -> bool:
        """Whether `message` is news for this vault (not what was said last time under `key`); news
        is remembered in the record, under the lock when it is free (else it is said again later)."""
        from memvault.store.lock import vault_lock

        header = self._header()
        if header is None or header["notices"].get(key) == message:
            return header is None
        try:
            with vault_lock(self.vault.lock_path, timeout=0, holder="search (notice)") as got:
                if got:
                    notices = self._header() or {"notices": {}}
                    self.state.write(meta={"notices": {**notices["notices"], key: message}})
        except (OSError, Exception) as exc:  # a read-only vault: say it every time
            if not isinstance(exc, OSError) and "readonly" not in str(exc).lower() and "read-only" not in str(exc):
                raise
        return True

    def changed_paths(self) -> frozenset[str] | None:
        """The paths under entries/ whose files may not be what the record says (git's word, the
        record's own list); None when git cannot say (no record synced to a commit, no git). Within
        `one_status`, git is asked once: the answer is reused while HEAD, the record's commit and this
        process's files stay as they were."""
        header = self._header()
        if header is None or not header["commit"] or not self._git_ok():
            return None
        from memvault.store import gitrepo

        kept = _STATUS.get()
        if kept is not None:
            key = (str(self.root), header["commit"], gitrepo.read_head(self.root), self.vault.writes)
            if key in kept:
                return kept[key]
        look_in, _ = self._folders_to_look_in(header, time.time_ns())
        answer = gitrepo.changes_since(self.root, header["commit"], files.ENTRIES, untracked_in=look_in)()
        changed = None if answer is None else frozenset(answer[1]) | frozenset(self.state.dirty())
        if kept is not None and answer is not None:
            kept.clear()  # only the newest answer is any use
            kept[key] = changed
        return changed

    @contextmanager
    def one_status(self) -> Iterator[None]:
        """One read made of many lookups by id (a page's review list with what each proposal would
        replace, one memory with its links and its story): git is asked which files may differ from
        the record (`changed_paths`, the `git status` of every `Vault.find`) once, on the first
        lookup, and every lookup within reuses its answer, while HEAD, the record's commit and this
        process's files (`Vault.writes`) stay as they were; else it is asked again. Nothing is kept
        past the block, so the next read asks git anew and sees what another process wrote in
        between (docs/design.md, "The index"). Per thread and task (a context variable): the threads
        of a server each read with their own. Nested: the outer block's answer serves."""
        if _STATUS.get() is not None:
            yield
            return
        token = _STATUS.set({})
        try:
            yield
        finally:
            _STATUS.reset(token)

    def _folders_to_look_in(self, header, now: int) -> tuple[list[str] | None, dict[str, int]]:
        """(the folders under entries/ where a file may have been added or removed since the
        record's last listing, as literal pathspecs, None for every folder; the folders' mtimes
        seen now, before git lists them). A folder's mtime moves when an entry is added, removed
        or renamed in it, never when a file in it is edited in place: it spares the listing of new
        files only, never the stat of the files git tracks (docs/design.md, "The index")."""
        recorded = (header or {}).get("folders") or {}
        if not recorded or not (header or {}).get("commit"):
            return None, _folder_mtimes(self.root, now)
        look, seen = [], {}
        for rel, mtime in recorded.items():
            try:
                stat = os.lstat(os.path.join(self.root, rel))
            except OSError:
                continue  # gone: its parent's mtime moved
            if not stat_module.S_ISDIR(stat.st_mode):
                continue
            seen[rel] = 0 if stat.st_mtime_ns >= now - RACY_NS else stat.st_mtime_ns
            if not mtime or mtime != stat.st_mtime_ns:
                look.append(rel)
        # Listing a folder lists its subfolders too: the outermost ones are enough.
        look = [rel for rel in sorted(look) if not any(rel.startswith(other + "/") for other in look)]
        return [f":(literal){rel}" for rel in look], seen

    def _folders_after(self, seen: dict[str, int] | None, look_in: list[str] | None, now: int) -> dict[str, int]:
        """The folders to record after a sync: their mtimes from before git listed them, and the
        subfolders found in the folders it listed (without an mtime: listed again next time)."""
        if seen is None:
            return {}
        folders = dict(seen)
        listed = [p.removeprefix(":(literal)") for p in look_in] if look_in is not None else []
        for top in listed:
            for rel in _subfolders(self.root, top):
                folders.setdefault(rel, 0)
        return folders

    def id_candidates(self, needle: str, changed: set[str] | None | bool = True) -> list[Path]:
        """The files that may hold a memory whose id starts with `needle` (lower case), live or
        tombstone, sorted: those the record gives such an id and that have not changed since, plus
        every file the record does not know as it is now (a file git names, uncommitted, that the
        record read as it is, same size, mtime and ctime, is known). Reads no file; without git's
        word, every file is looked at. changed: changed_paths() when the caller has it already."""
        if changed is True:
            changed = self.changed_paths()
        if changed is not None:
            hits = {rel for rel, _ in self.state.with_id_prefix(needle)} - changed
            known = self.state.entries(changed) if changed else {}
            for rel in changed:
                full = os.path.join(self.root, rel)
                if (_entry_path(rel) or os.path.islink(full)) and _is_entry_file(full):
                    entry = known.get(rel)
                    if entry is not None and not str(entry["id"]).lower().startswith(needle):
                        try:  # a hand edit a sync read as it is now: its id is known, and not this one
                            if _same_stat(entry, os.lstat(full)):
                                continue
                        except OSError:
                            continue  # gone meanwhile
                    hits.add(rel)
            # A file outside the kind folders is no memory until reindex moves it in (files.in_kind_folder).
            return [self.root / rel for rel in sorted(hits) if files.in_kind_folder(rel)]
        header = self._header()
        known = self.state.entries() if header is not None else {}
        found = []
        for rel, full in sorted(_scan_entries(self.root, tombstones=True).items()):
            if not files.in_kind_folder(rel):
                continue
            entry = known.get(rel)
            if entry is not None:
                try:
                    stat = os.lstat(full)
                except OSError:
                    continue  # gone meanwhile
                # A racy record (no ctime kept) is trusted here on size and mtime: a wrong file read
                # costs a read, and an id changed within the second of a sync is not worth more.
                if _same_stat(entry, stat, racy_ok=True) and not str(entry["id"]).lower().startswith(needle):
                    continue
            found.append(Path(full))
        return found

    def _git_ok(self) -> bool:
        from memvault.store import gitrepo

        return self.vault.settings.enable_git_versioning and gitrepo.is_repo(self.root)

    # -- table -----------------------------------------------------------------
    def _connect(self):
        if self._db is None:
            lancedb = import_lancedb()
            self.dir.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.dir), **_bounded_caches(lancedb))
        return self._db

    def table(self, create: bool = False):
        """The open table, or None when there is none yet (and create is False)."""
        if self._table is not None:
            return self._table
        if not create and not self.dir.is_dir():
            return None  # reading never creates the sidecar
        if _kept is not None and self._take_kept():
            return self._table
        db = self._connect()
        try:
            self._table = db.open_table(TABLE)
            self._versions_seen = None
        except (FileNotFoundError, ValueError) as exc:
            if "not found" not in str(exc).lower() and "was not found" not in str(exc).lower() \
                    and not isinstance(exc, FileNotFoundError):
                raise
            if not create:
                return None
            self._table = db.create_table(TABLE, schema=self._schema())
            self._versions_seen = None
        if _kept is not None:
            _keep(self)
        return self._table

    def _take_kept(self) -> bool:
        """The connection and table this process kept for this index (keep_handles), at the table's latest
        version, as a table opened now would be; False when none is kept, or the table folder is no longer
        the one it was (rebuilt, removed: its record is dropped)."""
        kept = _kept.get(str(self.dir))
        if kept is None:
            return False
        if not kept.current(table_folder(self.dir)):
            _forget(self.dir)
            return False
        try:
            kept.table.checkout_latest()
        except Exception:  # dropped or unreadable meanwhile: opened anew, as a cold command would
            _forget(self.dir)
            return False
        self._db, self._table = kept.db, kept.table
        self._versions_seen = None
        self._filter_indexes_checked = kept.filter_indexes_checked
        self.range_cache = kept.range_cache
        self.dense_copy = kept.dense_copy or self.dense_copy
        return True

    def refresh(self) -> None:
        """See what other processes wrote since the table was opened (a handle sees its own writes
        only); a long-lived reader calls this after its folder changed. Nothing to read when the
        table's version folder is as it was at the last look (a write, any process's, adds a manifest
        there): LanceDB's checkout_latest costs ~8 ms, before every search of a warm process."""
        if self._table is not None:
            stamp = _versions_stamp(self.dir)
            if stamp is not None and stamp == self._versions_seen:
                return
            try:
                self._table.checkout_latest()
            except Exception:  # dropped or rebuilt meanwhile: open it again on the next use
                self._table = None
                if _kept is not None:
                    _forget(self.dir)
                stamp = None
            self._versions_seen = stamp

    @staticmethod
    def table_gone(exc: BaseException) -> bool:
        """Whether a read failed because the table version it held was pruned (KEEP_VERSIONS_SECONDS):
        its data files are gone; the newest version has the rows."""
        return isinstance(exc, RuntimeError) and "lance error: Not found" in str(exc)

    def _schema(self):
        import pyarrow as pa

        return pa.schema([
            ("id", pa.string()),
            ("path", pa.string()),
            ("role", pa.string()),
            ("conversation_id", pa.string()),
            ("created_us", pa.int64()),  # UTC microseconds since the epoch, for --since/--until
            ("created_at", pa.string()),
            ("tags", pa.string()),  # "|a|b|" so a tag filter is one LIKE
            ("text", pa.string()),
            ("index_text", pa.string()),  # what BM25 reads: the text, a turn with its context
            ("sha256", pa.string()),
            ("meta", pa.string()),  # the other front-matter keys as JSON
            *TOLD_FIELDS(pa),
            ("vector", pa.list_(pa.float32(), self.embedder.dim)),
        ])

    def _reset(self) -> None:
        self._table = None
        self._db = None
        if _kept is not None:
            _forget(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)

    def ensure_fts(self, table, again: bool = False) -> bool:
        """A BM25 index on index_text; rows added later are still searched (unindexed rows are scanned).
        again: made anew from the rows even when there is one (a damaged one). Whether it made one."""
        indices = {getattr(i, "name", "") for i in table.list_indices()}
        if (again or f"{FTS_COLUMN}_idx" not in indices) and table.count_rows() > 0:
            import warnings

            with warnings.catch_warnings():  # the sync API's replacement takes vector indexes only
                warnings.simplefilter("ignore", DeprecationWarning)
                table.create_fts_index(FTS_COLUMN, replace=True, **FTS_OPTIONS)
            return True
        return False

    # -- the BM25 index's integrity (docs/design.md, "The index") --------------------------
    def record_fts(self, table) -> None:
        """The size, mtime and sha256 of every file of the BM25 index, as this process just wrote
        them (FTS_SUMS, beside the table: a rebuilt index goes with its record). LanceDB's index files
        carry no checksum of their own: bytes changed in them lowered scores and raised nothing."""
        found: dict[str, list] = {}
        for uuid in _fts_uuids(table):
            folder = table_folder(self.dir) / "_indices" / uuid
            for path in sorted(folder.iterdir()) if folder.is_dir() else []:
                stat = path.stat()
                found[f"{uuid}/{path.name}"] = [stat.st_size, stat.st_mtime_ns, _sha256_file(path)]
        files.atomic_write(self.dir / FTS_SUMS, json.dumps({"files": found}, sort_keys=True) + "\n")

    def fts_damage(self, thorough: bool = False) -> str | None:
        """What is wrong with the BM25 index's files, in words; None when nothing is (or nothing is
        known: no record yet, or an index another process made since, the recorded one pruned).
        A search compares each file's size and mtime with the record (a few stats) and hashes only a
        file whose stat moved; thorough (`reindex`, `reindex --check`) hashes every file."""
        recorded = self._fts_record()
        if recorded is None:
            return None
        base = table_folder(self.dir) / "_indices"
        for rel, (size, mtime_ns, digest) in sorted(recorded.items()):
            path = base / rel
            if not path.parent.is_dir():
                continue  # that index was replaced and pruned: the record is of an older one
            try:
                stat = path.stat()
            except OSError:
                return f"the full-text index file {path} is missing"
            if not thorough and (stat.st_size, stat.st_mtime_ns) == (size, mtime_ns):
                continue
            if stat.st_size != size or _sha256_file(path) != digest:
                return f"the full-text index file {path} is not as memvault wrote it"
        return None

    def _fts_record(self) -> dict | None:
        """The BM25 index's recorded files (record_fts), None without a readable record. Read again only when
        the record's file is not the one read last (each write of it is a new file: atomic_write); a
        warm process's searches stat it (read and parsed: ~0.3 ms a search)."""
        path = self.dir / FTS_SUMS
        try:
            stat = path.stat()
            seen = (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            held = self._fts_sums
            if held is not None and held[0] == seen:
                return held[1]
            recorded = json.loads(path.read_text())["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        self._fts_sums = (seen, recorded)
        return recorded

    def fts_probe(self, table) -> str | None:
        """A query of the BM25 index for the words of a row it holds: what LanceDB says when it cannot
        read the index (a panic, "corrupt file", a file not found); None when it answers."""
        if not _fts_uuids(table):
            return None
        try:
            sample = table.search().select([FTS_COLUMN]).limit(1).to_list()
            words = " ".join((sample[0][FTS_COLUMN] if sample else "").split()[:8])
            if words:
                table.search(words, query_type="fts", fts_columns=FTS_COLUMN).limit(1).to_list()
        except Exception as exc:
            if self.table_gone(exc):
                return None
            return f"the full-text index in {self.dir} cannot be read ({_first_line(exc)})"
        return None

    def ensure_filter_indexes(self, table) -> None:
        """Bitmap indexes on the columns every search filters by (role, conversation_id) and a B-tree
        on created_us (a time range: a month of 15,000 rows, 14.5 -> 7.4 ms a dense query), once the
        table is big enough for them to pay: without them each dense search reads every row's
        vector to find the scope's (at 100,000 rows, 98 ms of CPU and 170 MB more memory a query;
        with them 13 ms, the same results: bench/README.md, "Scale"). Rows added later are checked
        without the index until compaction takes them in. Checked once per process."""
        if self._filter_indexes_checked:
            return
        self._filter_indexes_checked = True
        if table.count_rows() < FILTER_INDEX_ROWS:
            self._filter_indexes_checked = False  # look again once it has grown
            return
        kept = _kept.get(str(self.dir)) if _kept is not None else None
        if kept is not None and kept.table is table:
            kept.filter_indexes_checked = True  # the next command's Index need not look again
        present = {getattr(i, "name", "") for i in table.list_indices()}
        for column in FILTER_INDEX_COLUMNS:
            if f"{column}_idx" not in present:
                from lancedb.index import Bitmap

                table.create_index(column, config=Bitmap())
        for column in (TIME_INDEX_COLUMN, PATH_INDEX_COLUMN):
            if f"{column}_idx" not in present:
                from lancedb.index import BTree

                table.create_index(column, config=BTree())

    # -- sync: one entry point per kind of caller (docs/design.md, "The index") -------------
    def catch_up(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        """The index in line with every change to the files since the last sync, hand edits
        included: before a read, after a clone. The caller holds the vault lock.

        git says which files may differ from what the record holds since the commit the record is
        synced to; its processes run while LanceDB loads. Without git, every file's size and mtime
        are compared with the record."""
        return _Sync(self, _How(hand=True), progress).run()

    def take_in(self, paths: Iterable[Path], progress: Callable[[int, int], None] | None = None,
                upkeep: bool = True, hand: bool = False, compact: bool = True) -> SyncReport:
        """Exactly these files, which a command just wrote or removed, a pull checked out, or the
        folder's events named (hand: edits made outside memvault, read as they are); nothing else is
        looked at. The caller holds the vault lock. upkeep: the table's upkeep after writing
        (`maintain`); a bulk add's batches leave it to the last one. compact=False: its optimize
        left to the caller's next maintain()."""
        return _Sync(self, _How(paths=paths, upkeep=upkeep, hand=hand, compact=compact), progress).run()

    def reindex(self, full: bool = False, verify: bool = True,
                progress: Callable[[int, int], None] | None = None) -> SyncReport:
        """`memvault reindex` (and sync's hand edits): catch_up, and give files without front
        matter a front matter; verify: compare every row's path and hash with the record (other
        syncs compare only the row count, which is free); full: rebuild from every file. The
        caller holds the vault lock."""
        return _Sync(self, _How(adopt=True, verify=verify, full=full), progress).run()

    def check(self) -> SyncReport:
        """The drift between files and index (`reindex --check`): every file and every row
        compared with the record, and the files a search read as they are, still as it read them,
        looked at for secrets (report.unscrubbed; detect-secrets is loaded only when there are such
        files); writes nothing (the caller holds a shared lock, or none)."""
        report = _Sync(self, _How(write=False, verify=True), None).run()
        if not report.rebuilt and self.state_path.exists():
            from memvault.store import secret_scan
            from memvault.store.state import Unreadable

            try:
                unscanned = self.state.unscanned() if secret_scan.enabled(self.vault) else {}
            except Unreadable:
                unscanned = {}
            moved = set(report.changed) | set(report.removed)  # said as such already
            for rel, digest in sorted(unscanned.items()):
                try:
                    raw = (self.root / rel).read_bytes() if rel not in moved else None
                except OSError:
                    continue
                if raw is None or hashlib.sha256(raw).hexdigest() != digest:
                    continue  # changed since it was read: the next sync reads it
                found = secret_scan.scan(raw.decode("utf-8", "replace"))
                if found:
                    report.unscrubbed[rel] = [f.label for f in found]
        return report

    def same_texts(self, conversation: str, role: str, texts: list[str]) -> dict[str, list[dict[str, Any]]]:
        """{text: rows} for the live rows of this conversation and role whose text is one of `texts` (several
        for a text with a placeholder: two passwords withheld from one sentence), by path."""
        table = self.table()
        found: dict[str, list[dict[str, Any]]] = {}
        if table is None:
            return found
        for chunk in _chunks(sorted(set(texts)), 200):
            where = (where_clause((role,), conversation) + " AND text IN ("
                     + ", ".join(_sql_str(t) for t in chunk) + ")")
            for row in table.search().where(where).select(["id", "path", "text"]).limit(None).to_list():
                found.setdefault(row["text"], []).append(row)
        for rows in found.values():
            rows.sort(key=lambda row: row["path"])
        return found

    def nearest(self, vector, k: int, roles: Iterable[str] | None = None,
                conversation: str | None = None) -> list[dict[str, Any]]:
        """The k rows closest to `vector` (cosine distance in `_distance`), filtered."""
        table = self.table()
        if table is None or k <= 0:
            return []
        return top_rows(lambda limit: table.search([float(x) for x in vector], vector_column_name="vector")
                        .metric("cosine").where(where_clause(roles, conversation), prefilter=True).limit(limit),
                        k, by_distance)

    def snapshot(self, moment, tombstones: list[Memory], folder: Path, left_out: set[str] = frozenset()):
        """A table of what the vault held at `moment` (`search --as-of`), in `folder` (a temporary
        one the caller removes): the rows of memories created by then, with their stored vectors
        and turn context, and rows for `tombstones` (deleted after it; embedded now, text only,
        they have no row). Same schema and BM25 index as the table, so the read path runs on it
        unchanged. Costs a pass over the table: a search of the past, not the everyday one.
        left_out: the paths of rows not to hold (imported after the moment)."""
        import pyarrow.compute as pc

        lancedb = import_lancedb()
        schema = self._schema()
        table = self.table()
        held = None
        if table is not None:
            rows = table.to_arrow()
            held = rows.filter(pc.less_equal(rows["created_us"], int(moment.timestamp() * 1_000_000)))
            if left_out:  # what an import brought in after the moment (reading/as_of.py)
                import pyarrow as pa

                held = held.filter(pc.invert(pc.is_in(held["path"], pa.array(sorted(left_out), pa.string()))))
            held = _with_told_columns(held).select(schema.names).cast(schema)
        snapshot = lancedb.connect(str(folder)).create_table(TABLE, schema=schema)
        if held is not None and held.num_rows:
            snapshot.add(held)
        if tombstones:
            vectors = self.embedder.embed([m.text for m in tombstones])
            snapshot.add([_row(m.path.relative_to(self.root).as_posix(), m, "", vector)
                          for m, vector in zip(tombstones, vectors)])
        self.ensure_fts(snapshot)
        return snapshot

    def add_told(self, table) -> int:
        """A table built before issue 45 gets the told columns, and the rows whose words have a relative
        time get them filled, from the text and date the row holds: no file read, nothing embedded
        again. Returns how many rows were filled."""
        import pyarrow as pa

        from memvault.store import relative_times

        table.add_columns({name: f"CAST(NULL AS {'STRING' if kind == pa.string() else 'BIGINT'})"
                           for name, kind in TOLD_FIELDS(pa)})
        rows = table.search().where("role != 'summary'").select(["id", "text", "created_at"]) \
            .limit(None).to_arrow().to_pylist()
        filled = []
        for row in rows:
            if not relative_times.has_relative(row["text"]):
                continue
            told = relative_times.resolve(row["text"], files.parse_time(row["created_at"]))
            if told:
                start, end = relative_times.span_us(told)
                filled.append({"id": row["id"], "told": relative_times.dumps(told), "told_from_us": start,
                               "told_to_us": end})
        for chunk in _chunks(filled, ADD_ROWS):
            update = pa.Table.from_pylist(chunk, schema=pa.schema([("id", pa.string()), *TOLD_FIELDS(pa)]))
            table.merge_insert("id").when_matched_update_all().execute(update)
        if filled:
            self._touched = True
            self.maintain()  # the rewritten rows back into the BM25 and filter indexes
        return len(filled)

    def rows(self, columns: list[str], roles: Iterable[str] | None = None,
             conversation: str | None = None) -> list[dict[str, Any]]:
        """Every row matching the filter, with these columns only."""
        table = self.table()
        if table is None:
            return []
        return table.search().where(where_clause(roles, conversation)).select(columns).limit(None).to_list()

    def vectors(self, roles: Iterable[str], conversation: str) -> dict[str, Any]:
        """{id: vector} of the rows of these roles in the conversation: from a long-lived process's copy of
        the table at the handle's version (dense_copy.py; no LanceDB query: the episodes' look after every
        chat of a server), else LanceDB's rows. The same floats either way."""
        table = self.table()
        if table is None:
            return {}
        copy = self.dense_copy.current(table) if self.dense_copy is not None else None
        if copy is not None:
            from memvault.store.row_filter import RowFilter

            return copy.vectors_where(RowFilter(roles=tuple(roles), conversations=(conversation,)))
        return {row["id"]: row["vector"] for row in self.rows(["id", "vector"], roles, conversation)}

    def unreviewed_rows(self, conversation: str | None = None) -> list[dict[str, Any]]:
        """The rows of learned facts (waiting ones too) that `memvault review` has not seen, newest
        first: origin learned and no `reviewed` key in the front matter kept as JSON (see `_row`)."""
        where = (where_clause(("memory", files.PENDING_ROLE), conversation)
                 + " AND " + meta_clause(files.ORIGIN_KEY, "learned") + " AND NOT " + meta_clause(files.REVIEWED))
        return sorted(self._rows_where(where), key=lambda row: row["created_us"], reverse=True)

    def review_counts(self) -> dict[str, int]:
        """What `memvault review` would list, counted: waiting (pending: setting learned_review),
        proposals (live, would retire a fact the user added), learned (live, not reviewed)."""
        counts = {"pending": 0, "proposal": 0, "learned": 0}
        table = self.table()
        if table is None:
            return counts
        unreviewed = " AND " + meta_clause(files.ORIGIN_KEY, "learned") + " AND NOT " + meta_clause(files.REVIEWED)
        counts["pending"] = table.count_rows(where_clause((files.PENDING_ROLE,)) + unreviewed)
        live = table.count_rows(where_clause(("memory",)) + unreviewed)
        counts["proposal"] = table.count_rows(where_clause(("memory",)) + unreviewed + " AND "
                                              + meta_clause("would_replace"))
        counts["learned"] = live - counts["proposal"]
        return counts

    def unlearned_turn_rows(self, conversation: str | None = None) -> list[dict[str, Any]]:
        """The rows of user turns still owed learning (`extracted: false`), oldest first."""
        where = where_clause(("user",), conversation) + " AND " + meta_clause(files.EXTRACTED, False)
        return sorted(self._rows_where(where), key=lambda row: row["created_us"])

    def mark_learned(self, ids: Iterable[str]) -> None:
        """Record user turns as learned from, in the record (learn.mark_quietly): no lock, no commit."""
        from memvault.store.state import State

        State(self.state_path).mark_learned(ids)

    def learned_ids(self, ids: Iterable[str]) -> set[str]:
        """The ones of these user turn ids the record says were learned from (mark_learned)."""
        from memvault.store.state import State, Unreadable

        ids = list(ids)
        if not ids or not self.state_path.exists():
            return set()
        state = State(self.state_path)  # a connection of this call's own: any thread may ask
        try:
            return state.learned(ids)
        except Unreadable:
            return set()
        finally:
            state.close()

    def supersessions(self) -> list[dict[str, str]]:
        """What the files declare superseded (store/supersession.py), as the last sync recorded it."""
        from memvault.store.state import Unreadable

        try:
            return self.state.supersessions() if self.state_path.exists() else []
        except Unreadable:
            return []

    def texts(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{id: {"text", "created_at", "conversation_id"}} of the live rows with these ids."""
        table = self.table()
        wanted = sorted(set(ids))
        if table is None or not wanted:
            return {}
        rows = (table.search().where("id IN (" + ", ".join(_sql_str(i) for i in wanted) + ")")
                .select(["id", "text", "created_at", "conversation_id"]).limit(len(wanted) * 2).to_list())
        return {row["id"]: row for row in rows}

    def _rows_where(self, where: str) -> list[dict[str, Any]]:
        table = self.table()
        if table is None:
            return []
        return table.search().where(where).select(["id", "path", "created_us"]).limit(None).to_list()

    def _mismatch(self, table) -> tuple[list[str], set[str]]:
        """Compare the rows with the record. Returns the records whose row is missing, doubled or
        stale (indexed again by the sync), and the paths of every row the record does not vouch
        for once those are dropped (to delete: stray rows and repaired ones)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        arrow = table.search().select(["path", "sha256"]).limit(None).to_arrow()
        recorded_rows = self.state.live_hashes_sorted() if self.state_path.exists() else []
        if len(recorded_rows) == arrow.num_rows:  # the usual case, compared in C: in step
            order = pc.sort_indices(arrow, sort_keys=[("path", "ascending"), ("sha256", "ascending")])
            paths, digests = (list(column) for column in zip(*recorded_rows)) if recorded_rows else ([], [])
            if pc.take(arrow["path"], order).equals(pa.chunked_array([pa.array(paths, pa.string())])) and \
                    pc.take(arrow["sha256"], order).equals(pa.chunked_array([pa.array(digests, pa.string())])):
                return [], set()
        data = arrow.to_pydict()
        rows: dict[str, list[str]] = {}
        for path, digest in zip(data["path"], data["sha256"]):
            rows.setdefault(path, []).append(digest)
        recorded = self.state.live_hashes() if self.state_path.exists() else {}
        repaired = [rel for rel, digest in recorded.items() if rows.get(rel) != [digest]]
        vouched = set(recorded) - set(repaired)
        stray = {path for path in rows if path not in vouched}
        return repaired, stray | set(repaired)

    def _read(self, path: Path, entry: dict[str, Any] | None, adopt: bool, tombstone: bool, report: SyncReport):
        """(the memory, or None when the bytes are the ones recorded; their sha256; the stat from
        before reading them; their git blob id). One read: the hash is of the very bytes that were
        parsed, so a file changed in between looks changed to the next sync, never unchanged."""
        if entry is not None:  # touched or copied, maybe not changed: the bytes say, no parsing
            try:
                before = os.lstat(path)
                if stat_module.S_ISREG(before.st_mode) and before.st_size <= files.MAX_MEMORY_BYTES:
                    raw = path.read_bytes()
                    digest = hashlib.sha256(raw).hexdigest()
                    if digest == entry["sha256"]:
                        return None, digest, before, self._blob_id(raw)
            except OSError:
                pass
        memory, adopted, raw, stat = files.read_memory_raw(path, self.root)
        if adopted and not tombstone:
            report.adopted.append(memory)
            if adopt:
                files.write_memory(self.root, memory, path)
                raw, stat = path.read_bytes(), path.stat()  # rewritten with front matter: that is what is indexed
        if adopt:
            from memvault.store import secret_scan

            if secret_scan.withhold_hand_edit(self.vault, memory, path):  # a key typed into a file: never indexed
                raw, stat = path.read_bytes(), path.stat()
        return memory, hashlib.sha256(raw).hexdigest(), stat, self._blob_id(raw)

    def _blob_id(self, raw: bytes) -> str:
        """The id git gives these bytes as a blob (SHA-1, or SHA-256 in a repository of that format)."""
        digest = hashlib.sha256() if self._object_format == "sha256" else hashlib.sha1()
        digest.update(b"blob %d\0" % len(raw))
        digest.update(raw)
        return digest.hexdigest()

    def _apply(self, report: SyncReport, to_index, progress, maintain: bool = True, contexts=None,
               compact: bool = True) -> None:
        stale = report.removed + report.changed + (contexts.refreshed if contexts is not None else [])
        table = self.table(create=bool(to_index))
        indexed_again = {rel for rel, *_ in to_index}
        if table is not None and stale:  # gone for good; a changed file's row is replaced below, in one step
            for chunk in _chunks([p for p in stale if p not in indexed_again], 500):
                table.delete("path IN (" + ", ".join(_sql_str(p) for p in chunk) + ")")
        if table is not None and to_index:
            # Redoing an interrupted sync: rows for these paths may already be there. Looked up first
            # (the path's B-tree): a delete that finds nothing still makes a table version.
            added = set(report.added)  # a list: `in` on it made a 100,000-file sync quadratic
            new_paths = [rel for rel, *_ in to_index if rel in added]
            for chunk in _chunks(new_paths, 500):
                clause = "path IN (" + ", ".join(_sql_str(p) for p in chunk) + ")"
                if table.count_rows(clause):
                    table.delete(clause)
        # A changed file's row is replaced in one table version (merge_insert on path), not deleted,
        # embedded and added: a search in between, of this process or another, found neither.
        replaced = indexed_again - set(report.added)
        done, waiting = 0, []
        # Similar lengths in one batch: the embedder pads a batch to its longest text.
        to_index = sorted(to_index, key=lambda item: len(item[1].text))
        for batch in _chunks(to_index, EMBED_BATCH):
            vectors = self.embedder.embed_as_queried([item[1].text for item in batch])  # a chat's message: its query's
            waiting.append(self._arrow_rows(batch, vectors, contexts))
            done += len(batch)
            if done % ADD_ROWS == 0 or done == len(to_index):  # one fragment (and table version) per ADD_ROWS
                import pyarrow as pa

                rows = pa.concat_tables(waiting)
                with (self.dense_copy.writing(table) if self.dense_copy is not None
                      else contextlib.nullcontext(lambda *taken: None)) as took:
                    paths = replaced.intersection(rows.column("path").to_pylist()) if replaced else set()
                    if paths:
                        table.merge_insert("path").when_matched_update_all().when_not_matched_insert_all()\
                            .execute(rows)
                    else:
                        table.add(rows)
                    took(rows, paths)
                waiting = []
            if progress:
                progress(done, len(to_index))
        self._touched |= bool(to_index or stale)
        if maintain:
            self.maintain(compact)

    def maintain(self, compact: bool = True) -> None:
        """The table's upkeep after writes: the BM25 and filter indexes made if there are none
        (over every row), and a compaction (_compact: the appends merged, not the big fragments before
        them; the new rows into the indexes, old versions pruned) once the appends have made
        COMPACT_FRAGMENTS fragments or the BM25 index is behind (_bm25_behind). A bulk add calls it
        once at its end, not after each of its batches. compact=False: the indexes made if missing,
        the compaction left to the next maintain() (a change whose readers wait for its rows, which
        they need not wait for)."""
        table = self.table()
        if table is not None and self._touched:
            made = self.ensure_fts(table)
            self.ensure_filter_indexes(table)
            if not compact:
                if made:
                    self.record_fts(table)
                return
            if _fragments(table) >= COMPACT_FRAGMENTS or _bm25_behind(table):
                held = self.dense_copy.current(table) if self.dense_copy is not None else None
                self._compact(table)
                if held is not None:
                    self.dense_copy.after_compaction(table, held)
                made = True  # the new rows taken into a new BM25 index
            if made or not (self.dir / FTS_SUMS).exists():  # the files just written (or, first, as they are)
                self.record_fts(table)
        self._touched = False

    def _compact(self, table) -> None:
        """The upkeep's compaction: the fragments after the settled ones merged (_settled), deleted rows
        dropped, the new rows taken into the BM25 and filter indexes, versions older than
        KEEP_VERSIONS_SECONDS pruned; the handle then at the new version. Through pylance, whose
        compact_files can leave fragments out (LanceDB's `optimize` has no such option and merges every
        fragment the BM25 index holds: the whole table every other time, 0.3-0.6 s at 11,000 rows under
        load, with the vault locked). Without pylance, or when it fails, LanceDB's `optimize` does it
        all, as before, and says why once per process: nothing is lost either way (each step is one
        commit of LanceDB's; what one left undone, optimize does)."""
        from datetime import timedelta

        keep = timedelta(seconds=KEEP_VERSIONS_SECONDS)
        try:
            import lance  # pylance: only here, at a compaction (~30 ms to import after lancedb)
        except ImportError as exc:
            return self._optimize_whole(table, keep, f"pylance is not installed ({exc})")
        try:
            dataset = lance.dataset(str(table_folder(self.dir)),  # the newest version (the lock is held)
                                    index_cache_size_bytes=INDEX_CACHE_BYTES,
                                    metadata_cache_size_bytes=METADATA_CACHE_BYTES)
            fragments = [(f.metadata.id, f.metadata.num_rows, f.metadata.num_deletions)
                         for f in dataset.get_fragments()]
            dataset.optimize.compact_files(excluded_fragment_ids=_settled(fragments),
                                           materialize_deletions=True, materialize_deletions_threshold=0.0)
            dataset.optimize.optimize_indices()
            dataset.cleanup_old_versions(older_than=keep)
            table.checkout_latest()
        except Exception as exc:  # noqa: BLE001 (LanceDB's optimize instead, which does what is left)
            self._optimize_whole(table, keep, f"pylance's compaction failed ({_first_line(exc)})")

    def _optimize_whole(self, table, keep, why: str) -> None:
        global _WHOLE_SAID
        if not _WHOLE_SAID:
            _WHOLE_SAID = True
            self.notice(f"memvault: {why}; the index's upkeep compacts the whole table instead")
        with contextlib.suppress(Exception):
            table.checkout_latest()  # what a failed step committed
        table.optimize(cleanup_older_than=keep)

    def _arrow_rows(self, batch, vectors, contexts=None):
        """One Arrow table for a batch: the vectors go in as one float32 buffer, not as Python floats."""
        import numpy as np
        import pyarrow as pa

        rows = [_row(rel, memory, digest, None, contexts.index_text(rel, memory) if contexts else memory.text)
                for rel, memory, digest, *_ in batch]
        schema = self._schema()
        columns = {name: [row[name] for row in rows] for name in schema.names if name != "vector"}
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
        columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, self.embedder.dim)
        return pa.Table.from_pydict(columns, schema=schema)


@dataclass
class _How:
    """What one sync is for; set by Index's entry points (catch_up, take_in, reindex, check)."""

    paths: Iterable[Path] | None = None  # only these files; None: whatever changed
    adopt: bool = False  # give files without front matter one
    write: bool = True  # False: report the drift, write nothing
    verify: bool = False  # compare every row with the record, not only their number
    full: bool = False  # rebuild from every file
    upkeep: bool = True  # the table's upkeep after writing
    compact: bool = True  # that upkeep's optimize too (else left to the next maintain())
    # what it reads was edited outside memvault and is not looked at for secrets (a search's sync): the files
    # it indexes that HEAD does not have are recorded as unscanned (check looks at them for secrets) until a
    # sync that adopts (reindex) reads them again; every other sync (a write's own files, reindex) takes
    # what it reads off that list
    hand: bool = False


class _Sync:
    """One sync, in steps (`run`): decide whether the table must be rebuilt or repaired, choose
    the files to look at, read those whose stat differs from the record, settle ids claimed
    twice, write the rows, then the record, in one transaction, last (docs/design.md, "The
    index"): a sync killed at any point leaves the old record, and the next one finishes."""

    def __init__(self, index: Index, how: _How, progress: Callable[[int, int], None] | None):
        self.index, self.how, self.progress = index, how, progress
        self.paths = how.paths
        self.report = SyncReport()
        self.asked_at = time.time_ns()
        self.git_answer = None
        self.look_in: list[str] | None = None
        self.folders_seen: dict[str, int] | None = None
        self.stray: set[str] = set()  # paths of rows the record does not vouch for (a sync cut short)
        self.repaired: list[str] = []  # records whose row is missing, doubled or stale
        self.watch: set[str] = set()  # files left out (unreadable, an id taken): looked at again next time
        self.unsure = False  # a file read without git's word on it that changed after git looked
        self.put: dict[str, dict[str, Any]] = {}
        self.drop: set[str] = set()
        self.declared: dict[str, list[tuple]] = {}  # path -> the supersessions the file declares, as read now
        self.meta_extra: dict[str, Any] = {}
        self.unscanned: dict[str, str] = {}  # a reindex: the files a search read as they are, to read again

    def run(self) -> SyncReport:
        self.start()
        self.judge_table()
        if self.how.verify and not self.report.rebuilt:
            self.judge_fts()
        if self.report.rebuilt and not self.how.write:
            return self.report
        self.clear()
        self.choose_files()
        to_index = self.claim_ids(self.look())
        if not self.how.write:
            return self.report
        contexts = self.turn_contexts(to_index)
        self.index._apply(self.report, to_index, self.progress, self.how.upkeep, contexts, self.how.compact)
        for rel, memory, digest, stat, oid in to_index:
            self.put[rel] = {"id": memory.id, **_stat_fields(stat, self.asked_at), "sha256": digest, "oid": oid,
                             "live": 1}
            self.declare(rel, memory)
        if self.header is not None and self.header.get("backfill"):
            self.backfill()
        self.record()
        return self.report

    def declare(self, rel: str, memory: Memory) -> None:
        """What the file says is superseded (store/supersession.py), to replace its rows in the record."""
        from memvault.store.supersession import declared_by

        self.declared[rel] = [s.row(rel) for s in declared_by(memory)]

    def backfill(self) -> None:
        """A record carried over from the version before the `superseded` table: the supersessions
        of every tombstone and every proposal, read once (no row is embedded again)."""
        index = self.index
        paths = {rel for rel, entry in index.state.entries().items() if not entry["live"]}
        table = index.table()
        if table is not None:
            paths |= {row["path"] for row in index._rows_where(meta_clause("would_replace"))}
        for rel in sorted(paths - set(self.declared) - self.drop):
            try:
                memory, _adopted = files.read_memory(index.root / rel, index.root)
            except (MemoryFileError, OSError):
                continue
            self.declare(rel, memory)
        from memvault.store.state import BACKFILL

        self.meta_extra[BACKFILL] = None

    def turn_contexts(self, to_index):
        """What BM25 reads for the memories to index (turn_context.py); the indexed turns whose
        context changed with them (up to two turns after a turn added, changed or removed) are
        appended to to_index, to be indexed again."""
        from memvault.store.turn_context import TurnContexts

        contexts = TurnContexts(self.index.root, {rel: memory for rel, memory, *_ in to_index})
        followers = contexts.after([rel for rel, *_ in to_index] + self.report.removed)
        indexed = self.index.state.entries(followers) if followers and self.header is not None else {}
        for rel in sorted(followers):
            entry = indexed.get(rel)
            if entry is None or not entry["live"]:  # no row (yet): a sync of every file reads it anyway
                continue
            try:
                memory, digest, stat, oid = self.index._read(Path(self.index.root / rel), None, False, False,
                                                             SyncReport())
            except MemoryFileError:
                continue
            to_index.append((rel, memory, digest, stat, oid))
            contexts.pending[rel] = memory
            contexts.refreshed.append(rel)
        return contexts

    def start(self) -> None:
        """The record's header; git asked what changed (its processes run meanwhile); the model."""
        index, how = self.index, self.how
        self.state_existed = index.state_path.exists()
        self.header = header = index._header()
        self.fresh = header is None
        if self.paths is None and how.write and index._git_ok():
            from memvault.store import gitrepo

            head = gitrepo.read_head(index.root)
            index._object_format = "sha256" if head and len(head) == 64 else "sha1"
            self.look_in, self.folders_seen = index._folders_to_look_in(header, self.asked_at)
            self.git_answer = gitrepo.changes_since(index.root, header["commit"] if header else None, files.ENTRIES,
                                                    untracked_in=self.look_in)
        elif self.paths is not None and header is not None and header["commit"]:
            index._object_format = "sha256" if len(header["commit"]) == 64 else "sha1"
        self.live = index.state.count() if header is not None else 0
        self.model = index.model_info() if how.write or (header and header["model"]) else None

    def judge_table(self) -> None:
        """report.rebuilt when the table must be built anew (--full, another model, no table, no
        record, unreadable); otherwise the rows to repair when their number (or, verifying, their
        paths and hashes) disagrees with the record."""
        index, how, report, header = self.index, self.how, self.report, self.header
        if how.full:
            report.rebuilt = "--full"
        elif self.live and header["model"] != self.model:
            old = (header["model"] or {}).get("name", "an unknown model")
            report.rebuilt = f"index was built with {old}; rebuilding with {self.model['name']}"
        if report.rebuilt or not (how.write or how.verify):
            return
        try:
            # Another process's write (a terminal `add` beside a warm server) is in the record and the
            # table already; a table opened before it would count one row fewer than the record and
            # call for a repair. Its latest version first: a manifest read.
            index.refresh()
            table = index.table() if how.write or index.dir.is_dir() else None
            if table is None and self.live:
                report.rebuilt = f"index table in {index.dir} is missing; rebuilding it"
            elif table is not None and FTS_COLUMN not in table.schema.names:
                report.rebuilt = (f"the index in {index.dir} was built by an older memvault (no {FTS_COLUMN} "
                                  "column: what search reads for a chat turn); rebuilding it, once")
            elif table is not None:
                if how.write and TOLD_COLUMNS[0] not in table.schema.names:
                    index.add_told(table)
                rows = table.count_rows()
                if rows and not self.live:
                    report.rebuilt = f"index state {index.state_path} is missing; rebuilding the index"
                elif how.verify or rows != self.live:
                    self.repaired, self.stray = index._mismatch(table)
                if rows and how.write and not index._filter_indexes_checked:
                    try:
                        index.ensure_filter_indexes(table)
                    except Exception:  # only speed is at stake: searched without them
                        pass
        except Exception as exc:  # a corrupt sidecar is rebuilt, never fatal
            report.rebuilt = f"index in {index.dir} is unreadable ({type(exc).__name__}); rebuilding it"

    def judge_fts(self) -> None:
        """reindex and reindex --check: the BM25 index's files as recorded (every byte) and a query of
        it answered; damaged, reindex makes it anew from the rows (nothing embedded again) and says
        so, --check reports it (out of step, exit 1)."""
        index, report = self.index, self.report
        table = index.table() if index.dir.is_dir() else None
        if table is None:
            return
        report.damaged = index.fts_damage(thorough=True) or index.fts_probe(table)
        if not self.how.write:
            return
        if report.damaged:  # said by the report (reindex's summary, --json)
            index.ensure_fts(table, again=True)
            report.repaired = True
        if report.damaged or not (index.dir / FTS_SUMS).exists():
            index.record_fts(table)  # an index from before the record: as it reads now

    def clear(self) -> None:
        """A rebuild drops record and table; stray rows are deleted (then every file is looked at)."""
        index, report = self.index, self.report
        if report.rebuilt:
            if report.rebuilt != "--full":
                index.notice(f"memvault: {report.rebuilt}")
            # The record goes first: a rebuild killed half-way must not leave a record that vouches
            # for rows the new table does not have yet.
            index.state.remove()
            index._reset()
            self.header, self.fresh, self.live, self.paths = None, True, 0, None
        elif self.stray:
            if self.how.write:
                index.notice(f"memvault: the index in {index.dir} did not match its files "
                             f"({len(self.repaired)} rows missing or stale, "
                             f"{len(self.stray) - len(self.repaired)} stray); repairing it")
                for chunk in _chunks(sorted(self.stray), 500):
                    index.table().delete("path IN (" + ", ".join(_sql_str(p) for p in chunk) + ")")
            self.paths = None  # look at every file: those on disk are indexed again below

    def choose_files(self) -> None:
        """scope (the paths to look at), on_disk (those of them that are memory files now) and
        known (what the record says of them): the given paths, git's answer, or every file."""
        index, root, header = self.index, self.index.root, self.header
        self.seen = self.git_answer() if self.git_answer is not None else None  # (HEAD, {path: blob at HEAD})
        self.old_dirty: dict[str, str] = index.state.dirty() if header is not None else {}
        if self.how.adopt and self.how.write and header is not None:
            self.unscanned = index.state.unscanned()
        self.by_git = self.seen is not None and header is not None and bool(header["commit"]) and not self.stray
        if self.paths is not None:
            # Only memory files under entries/ (a pull also names memvault.toml, .gitignore...).
            scope = {rel for p in self.paths if _entry_path(rel := index.vault.relative(Path(p)))}
            self.known = index.state.entries(scope) if header is not None else {}
        elif self.by_git:
            scope = {rel for rel in set(self.seen[1]) | set(self.old_dirty) | set(self.unscanned) if _entry_path(rel)
                     or (rel.startswith(files.ENTRIES + "/") and os.path.islink(os.path.join(root, rel)))}
            self.known = index.state.entries(scope)
        else:
            self.on_disk = _scan_entries(root, tombstones=True)
            self.known = index.state.entries() if header is not None else {}
            self.scope = set(self.known) | set(self.on_disk)
            live_files = sum(1 for rel in self.on_disk if not _in_deleted(rel))
            if not self.state_existed and not self.report.rebuilt and live_files and self.how.write:
                index.notice(f"memvault: no index in {index.vault.sidecar}; building it from {live_files} files")
            self.report.removed.extend(sorted(p for p in self.stray if p not in self.on_disk))
        if self.paths is not None or self.by_git:
            self.scope = scope
            self.on_disk = {rel: full for rel in scope if _is_entry_file(full := os.path.join(root, rel))}
        for rel in self.repaired:
            self.known.pop(rel, None)  # indexed again below if it is still there
        self.drop = set(self.repaired)

    def look(self) -> list[tuple[str, Memory, str, os.stat_result, str, dict | None]]:
        """Read the files whose size or mtime is not as recorded (or that have no blob id yet: a
        record carried over); the new or changed memories among them."""
        report, known, put, drop = self.report, self.known, self.put, self.drop
        fresh_reads = []
        self.examined_unchanged = 0
        for rel in sorted(self.scope):
            path = self.on_disk.get(rel)
            entry = known.get(rel)
            if path is None:
                if entry is not None:
                    if entry["live"]:
                        report.removed.append(rel)
                        report.ids[rel] = entry["id"]
                    drop.add(rel)
                continue
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            tombstone = _in_deleted(rel)
            adopt = self.how.adopt and self.how.write and not tombstone
            if not tombstone and not files.in_kind_folder(rel):
                placed = self.place(rel, path, entry, adopt)
                if placed is None:
                    continue
                rel, path, entry = placed  # read below as the new file it is
                stat = os.lstat(path)
            # A file read without front matter (by a search, which does not write) keeps the id it was
            # given: reindex reads it again, to give it the front matter the notice promised.
            unadopted = adopt and entry is not None and entry["id"] == files.adopted_id(rel)
            # read as it is by a search: read again, to be looked at for secrets (index._read) and taken in
            unadopted = unadopted or (adopt and rel in self.unscanned)
            if entry and entry["oid"] and _same_stat(entry, stat) and not unadopted:
                self.examined_unchanged += entry["live"]
                continue
            try:
                read = self.index._read(Path(path), None if unadopted else entry, adopt, tombstone, report)
            except MemoryFileError as exc:
                self.watch.add(rel)
                if not tombstone:
                    report.skipped.append(exc)
                if entry is not None:  # a file that broke: its old row goes, the file stays on disk
                    if entry["live"]:
                        report.removed.append(rel)
                    drop.add(rel)
                continue
            memory, digest, stat, oid = read
            if self.seen is not None and not self.by_git and rel not in self.seen[1] \
                    and stat.st_ctime_ns >= self.asked_at - RACY_NS:
                self.unsure = True
            if entry and entry["sha256"] == digest:  # touched, not changed
                self.examined_unchanged += entry["live"]
                renewed = {**entry, **_stat_fields(stat, self.asked_at), "oid": oid}
                if renewed != entry:
                    put[rel] = renewed
                continue
            if tombstone:  # no row: recorded for find() and for what it says is superseded
                put[rel] = {"id": memory.id, **_stat_fields(stat, self.asked_at), "sha256": digest, "oid": oid,
                            "live": 0}
                self.declare(rel, memory)
                continue
            fresh_reads.append((rel, memory, digest, stat, oid, entry))
        return fresh_reads

    def place(self, rel: str, path: str, entry: dict[str, Any] | None, adopt: bool):
        """A markdown file outside the kind folders (entries/loose.md, entries/global/hand.md: see
        files.in_kind_folder). reindex adopts it: the file moves to where memvault keeps a memory of
        its kind and conversation (one without front matter: a note, given front matter), which every
        command then sees; (its new path, relative and absolute, no record). Any other sync leaves it
        out and says what reindex will do (None), as ls, stats, export and rm do not see it either."""
        report = self.report
        if entry is not None:  # indexed where it was (an earlier memvault): that row goes
            if entry["live"]:
                report.removed.append(rel)
                report.ids[rel] = entry["id"]
            self.drop.add(rel)
        root = self.index.root
        try:
            memory, adopted = files.read_memory(Path(path), root)
            target = files.relative_path_for(memory).as_posix()
        except (MemoryFileError, UsageError, InvalidConversationId) as exc:
            self.watch.add(rel)
            report.skipped.append(exc if isinstance(exc, MemoryFileError) else MemoryFileError(Path(path), str(exc)))
            return None
        destination = root / target
        if not adopt:
            self.watch.add(rel)
            report.skipped.append(MemoryFileError(Path(path), (
                "not where memvault keeps memories (entries/<conversation>/facts/, notes/, ...): `memvault "
                f"reindex` moves it into {target.rsplit('/', 1)[0]}/" + (" as a note" if adopted else ""))))
            return None
        if os.path.lexists(destination):
            try:
                there, _ = files.read_memory(destination, root)
            except MemoryFileError:
                there = None
            if there is None or there.id != memory.id or there.text != memory.text:
                self.watch.add(rel)
                report.skipped.append(MemoryFileError(Path(path), f"its place {target} is taken by another file"))
                return None
            # the same memory there already: a move a kill cut short; the copy left behind goes
        else:
            files.write_memory(root, memory, destination)  # with front matter
        os.unlink(path)
        report.moved.append((rel, target))
        self.scope.add(target)
        self.on_disk[target] = str(destination)
        return target, str(destination), None

    def claim_ids(self, fresh_reads) -> list[tuple[str, Memory, str, os.stat_result, str]]:
        """Two files claiming one id: the one the record already has keeps it; the other is
        skipped (and watched). What is left is to be indexed."""
        report, header = self.report, self.header
        claimed = self.index.state.owners(m.id for _, m, *_ in fresh_reads) if header is not None else {}
        ids_in_use = {i: rel for i, rel in claimed.items() if rel not in self.scope or rel in self.on_disk}
        to_index = []
        for rel, memory, digest, stat, oid, entry in fresh_reads:
            owner = ids_in_use.get(memory.id)
            if owner is not None and owner != rel:
                report.skipped.append(MemoryFileError(Path(self.on_disk[rel]), id_taken(memory.id, owner)))
                self.watch.add(rel)
                if entry is not None:
                    if entry["live"]:
                        report.removed.append(rel)
                    self.drop.add(rel)
                continue
            ids_in_use[memory.id] = rel
            (report.changed if entry and entry["live"] else report.added).append(rel)
            report.ids[rel] = memory.id
            to_index.append((rel, memory, digest, stat, oid))
        report.removed.sort()
        if self.paths is not None:
            report.unchanged = self.examined_unchanged
        else:
            report.unchanged = max(self.live - len(self.repaired) - len(report.removed) - len(report.changed), 0)
        return to_index

    def record(self) -> None:
        """The record's one transaction: the files read, the model, and what it is synced to."""
        index, header, known, put = self.index, self.header, self.known, self.put
        self.drop -= set(put)
        drop, old_dirty, seen = self.drop, self.old_dirty, self.seen
        meta: dict[str, Any] = dict(self.meta_extra)
        if header is None or header["model"] != self.model:
            meta["model"] = self.model
        dirty = dirty_add = None
        if self.paths is None:
            if seen is not None and not self.unsure:
                # Synced to HEAD: the paths where the record differs from it, with their blob there
                # (a path git does not name is as HEAD has it, and so is its record).
                at_head = {**{rel: oid for rel, oid in old_dirty.items() if rel not in seen[1]}, **seen[1]}
                dirty = {rel: oid for rel, oid in at_head.items() if (rel in self.scope or _entry_path(rel))
                         and (rel in self.watch or self.recorded_oid(rel) != oid)}
                if header is None or header["commit"] != seen[0]:
                    meta["commit"] = seen[0]
                folders = index._folders_after(self.folders_seen, self.look_in, self.asked_at)
                if header is None or folders != header["folders"]:
                    meta["folders"] = folders
                self.report.unlike_head = {rel: oid for rel, oid in dirty.items() if self.recorded_oid(rel) != oid}
                if dirty == old_dirty and not self.fresh:
                    dirty = None
                if self.by_git and len(seen[1]) - len(dirty or old_dirty) > GIT_REFRESH_AFTER:
                    from memvault.store import gitrepo

                    gitrepo.refresh_index(index.root)  # files git sees as touched: its stat data renewed
            elif header is not None and header["commit"]:
                meta["commit"] = ""  # not synced to a commit: the next sync looks at every file
                meta["folders"] = {}
        elif header is not None and header["commit"]:
            # What this write changed differs from the synced commit: until a sync sees that commit
            # (or the file as it was), the path stays under watch, with its blob at that commit.
            dirty_add = {rel: (known[rel]["oid"] if rel in known else "") for rel in set(put) | drop
                         if rel not in old_dirty}
            if any(rel in known and not known[rel]["oid"] for rel in dirty_add):
                meta["commit"] = ""  # a carried-over record without blob ids: look at every file next time
        unscanned, scanned = self.unscanned_files()
        if put or drop or meta or dirty is not None or dirty_add or self.fresh or unscanned:
            index.state.write(put=put, drop=drop, meta=meta, dirty=dirty, dirty_add=dirty_add, fresh=self.fresh,
                              superseded={rel: rows for rel, rows in self.declared.items() if rel not in drop},
                              unscanned=unscanned, scanned=scanned)

    def unscanned_files(self) -> tuple[dict[str, str], list[str]]:
        """(the files this sync indexed without looking for secrets, with their hash: a search's sync of
        hand edits; the files it read otherwise, taken off that list). A file HEAD has as it is (its blob
        id the one read) was committed (a pull, a clone, a commit by hand), not edited: not recorded."""
        from memvault.store import secret_scan

        if not self.how.hand:
            return {}, sorted(self.put)
        if not secret_scan.enabled(self.index.vault):
            return {}, []
        read = [rel for rel in self.report.added + self.report.changed if rel in self.put and self.put[rel]["live"]]
        if read and self.index._git_ok():
            from memvault.store import gitrepo

            at_head = gitrepo.blobs_at_head(self.index.root, read)
            if at_head is not None:
                read = [rel for rel in read if at_head[rel] != self.put[rel]["oid"]]
        return {rel: self.put[rel]["sha256"] for rel in read}, []

    def recorded_oid(self, rel: str) -> str:
        """The blob id of what the record holds for `rel` after this sync ("" for nothing)."""
        if rel in self.put:
            return self.put[rel]["oid"]
        if rel in self.drop:
            return ""
        entry = self.known.get(rel)
        return entry["oid"] if entry else ""


def id_taken(memory_id: str, owner: str) -> str:
    """Why a file claiming an id another file has is left out (the index, `ls`), and what to do."""
    return (f"id {memory_id} is already used by {owner}; to keep it as a memory of its own, delete its `id:` "
            "line and run `memvault reindex`")


def _row(rel: str, memory: Memory, digest: str, vector, index_text: str | None = None) -> dict[str, Any]:
    from memvault.store import relative_times

    created = memory.created_at
    index_text = memory.text if index_text is None else index_text
    # A summary's words are not shown as a memory's: only what a search returns is resolved.
    # Not in index_text: the words made a memory's text longer to BM25, which then ranked it below
    # the same words without them (tests/test_when.py); a question naming the day finds it by the span.
    told = relative_times.resolve(memory.text, created) if memory.role != "summary" else []
    told_from, told_to = relative_times.span_us(told)
    return {
        "id": memory.id,
        "path": rel,
        "role": memory.role,
        "conversation_id": memory.conversation_id,
        "created_us": int(created.timestamp() * 1_000_000),
        "created_at": files.format_time(created),
        "tags": "|" + "|".join(memory.tags) + "|" if memory.tags else "",
        "text": memory.text,
        "index_text": index_text,
        "sha256": digest,
        "meta": json.dumps({k: v for k, v in memory.front_matter().items() if k not in files.CORE_KEYS},
                           default=files.json_value, ensure_ascii=False),
        "told": relative_times.dumps(told),
        "told_from_us": told_from,
        "told_to_us": told_to,
        "vector": None if vector is None else [float(x) for x in vector],
    }


def _fts_uuids(table) -> list[str]:
    """The folders (under the table's _indices/) of the BM25 index now."""
    try:
        return [str(i.index_uuid) for i in table.list_indices() if getattr(i, "name", "") == f"{FTS_COLUMN}_idx"]
    except Exception:
        return []


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _first_line(exc: BaseException) -> str:
    """An error's first line, without the Rust source file LanceDB names after its message."""
    import re

    text = str(exc).strip().splitlines()
    line = re.sub(r",\s*/\S*/\.cargo/\S*", "", text[0] if text else type(exc).__name__)
    return line if len(line) <= 200 else line[:199] + "…"


def _versions_stamp(index_dir: Path) -> tuple[int, int] | None:
    """The table's version folder as (inode, modification time): a new manifest, a pruned one or a
    rebuilt table changes it. None (look again) when it cannot be read or changed too recently to
    tell: a later write could show the same time, within the file system's clock's step (a few ms
    where times have nanoseconds; a time of whole seconds says the step may be 2 s: FAT, HFS+)."""
    try:
        stat = os.stat(table_folder(index_dir) / "_versions")
    except OSError:
        return None
    step = 2 * RACY_NS if stat.st_mtime_ns % 1_000_000_000 == 0 else RACY_NS // 20
    if stat.st_mtime_ns >= time.time_ns() - step:
        return None
    return stat.st_ino, stat.st_mtime_ns


def _bm25_behind(table) -> bool:
    """Whether the BM25 index has left out more than FTS_UNINDEXED_MAX rows or 1% of them. BM25
    scores the rows it indexed with the word counts of its own rows and the others with all of
    them, so a fact added to a small vault would lose to an older one of the same words (a vault
    of 7: by 30%); a vault of 10,000 takes its new rows in once per 100 adds, one of 100,000 once
    per 1,000 (optimize: ~10 ms small, about a second at 100,000)."""
    unindexed, indexed = _bm25_counts(table)
    return unindexed > 0 and (unindexed > FTS_UNINDEXED_MAX or unindexed * 100 >= indexed)


def _bm25_counts(table) -> tuple[int, int]:
    """(rows outside the BM25 index, rows in it); (0, 0) when it cannot say (no index yet)."""
    try:
        stats = table.index_stats(f"{FTS_COLUMN}_idx")
        return (int(stats.num_unindexed_rows), int(stats.num_indexed_rows)) if stats is not None else (0, 0)
    except Exception:
        return 0, 0


def _unindexed(table) -> int:
    """Rows the BM25 index does not hold yet (0 when it cannot say)."""
    return _bm25_counts(table)[0]


def _settled(fragments: list[tuple[int, int, int]]) -> list[int]:
    """The ids of the fragments a compaction leaves as they are, of (id, rows, deleted rows) in the table's
    order: from the newest back, the first that holds SETTLED_RATIO times the rows after it (and at
    least SETTLED_ROWS) and every one before it, except those with deleted rows; none when more than
    KEEP_FRAGMENTS would stay. LanceDB's planner then merges the rest, neighbours with neighbours, the
    rows the BM25 index holds apart from those it does not yet."""
    after = 0
    for at in range(len(fragments) - 1, -1, -1):
        rows = fragments[at][1]
        if after and rows >= max(SETTLED_RATIO * after, SETTLED_ROWS):
            kept = [fid for fid, _, deleted in fragments[:at + 1] if not deleted]
            return kept if len(kept) <= KEEP_FRAGMENTS else []
        after += rows
    return []


def _fragments(table) -> int:
    """How many data fragments the table has (each add or delete of a sync makes one more)."""
    try:
        return int(table.stats()["fragment_stats"]["num_fragments"])
    except Exception:  # an older lancedb without stats(): compact by the other rules only
        return 0


def _scan_entries(root: Path, tombstones: bool = False) -> dict[str, str]:
    """{relative posix path: absolute path} of the files files.walk_entries yields (live entries
    only unless tombstones, no dot folders, files.is_memory_file names, a symlinked folder as
    itself so that reading it reports it, never entered), with plain strings: Path objects cost
    more than the walk itself on 10,000 files."""
    base = os.path.join(os.fspath(root), files.ENTRIES)
    if not os.path.isdir(base):
        return {}
    cut = len(os.fspath(root)) + 1
    found: dict[str, str] = {}
    for folder, dirs, names in os.walk(base, followlinks=False):
        parts = folder[len(base) + 1:].split(os.sep) if len(folder) > len(base) else []
        if len(parts) >= 2 and parts[1] == files.DELETED and not tombstones:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in dirs:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                found[full[cut:].replace(os.sep, "/")] = full
        for name in names:
            if _memory_name(name):
                full = os.path.join(folder, name)
                found[full[cut:].replace(os.sep, "/")] = full
    return found


def _same_stat(entry: dict[str, Any], stat: os.stat_result, racy_ok: bool = False) -> bool:
    """The file is as the record saw it: same size, mtime and ctime. The ctime catches what the
    other two miss (an edit of the same size whose mtime was set back): only the kernel sets it.
    racy_ok: a record that kept no ctime (see _stat_fields) passes on size and mtime."""
    return entry["size"] == stat.st_size and entry["mtime_ns"] == stat.st_mtime_ns \
        and (entry["ctime_ns"] == stat.st_ctime_ns or (racy_ok and not entry["ctime_ns"]))


def _stat_fields(stat: os.stat_result, synced_at: int) -> dict[str, int]:
    """What the record keeps of a stat. A file changed within a second of the sync could change
    again without its ctime moving (timestamps have a granularity): its ctime is not kept, so the
    next sync reads it once more (as git does with its "racily clean" entries)."""
    racy = stat.st_ctime_ns >= synced_at - RACY_NS
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": 0 if racy else stat.st_ctime_ns}


def _folder_mtimes(root: Path, now: int) -> dict[str, int]:
    """{relative folder: mtime_ns} of entries/ and every folder under it (no dot folders, no
    symlinked ones); 0 for one changed within a second of `now` (it may change again unseen)."""
    found: dict[str, int] = {}
    for rel in [files.ENTRIES, *_subfolders(root, files.ENTRIES)]:
        try:
            mtime = os.lstat(os.path.join(root, rel)).st_mtime_ns
        except OSError:
            continue
        found[rel] = 0 if mtime >= now - RACY_NS else mtime
    return found


def _subfolders(root: Path, top: str) -> list[str]:
    """The folders under `top` (relative), recursively, without dot folders or symlinked ones."""
    out, todo = [], [top]
    while todo:
        current = todo.pop()
        try:
            with os.scandir(os.path.join(root, current)) as listing:
                names = [entry.name for entry in listing
                         if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")]
        except OSError:
            continue
        for name in names:
            out.append(f"{current}/{name}")
            todo.append(f"{current}/{name}")
    return out


def _memory_name(name: str) -> bool:
    """files.is_memory_file, on a name."""
    return name.endswith(".md") and not name.startswith((".", "#", "~"))


def _entry_path(rel: str) -> bool:
    """Whether a relative path (from git) is one _scan_entries could yield as a file: under
    entries/, in no dot folder, with a memory file's name (tombstones included)."""
    parts = rel.split("/")
    return len(parts) >= 2 and parts[0] == files.ENTRIES and _memory_name(parts[-1]) \
        and not any(part.startswith(".") for part in parts[1:-1])


def _in_deleted(rel: str) -> bool:
    """Whether a relative path is a tombstone's (entries/<conversation>/deleted/...)."""
    parts = rel.split("/", 3)
    return len(parts) >= 4 and parts[0] == files.ENTRIES and parts[2] == files.DELETED


def _is_entry_file(full: str) -> bool:
    """A file or a symbolic link (reading it says it is one) is there."""
    try:
        mode = os.lstat(full).st_mode
    except OSError:
        return False
    return stat_module.S_ISREG(mode) or stat_module.S_ISLNK(mode)


def _chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start:start + size]


# How a retriever's rows are ordered, best first (top_rows): dense by cosine distance, BM25 by its score,
# rows of equal score by id.
def by_distance(row: dict) -> tuple:
    return (row["_distance"], row["id"])


def by_score(row: dict) -> tuple:
    return (-row["_score"], row["id"])


# At most this many rows are fetched to settle a tie at a retriever's cut (top_rows).
TIE_ROWS = 4096


def top_rows(query_with_limit: Callable[[int], Any], depth: int, key: Callable[[dict], tuple],
             tied_past_cut: dict | None = None) -> list[dict]:
    """A retriever's best `depth` rows, the same every time on the same files: LanceDB returns rows of
    equal score in the order it meets them (its table's row order, which the history of writes sets,
    and its threads), so both the order among equals and which of them make the cut would be chance
    (issue 44: 12 runs of one search on one vault gave 3 lists). Asked for 4 x `depth` + 1 rows
    (a dense query scans its scope whatever the limit: a second scan for a tie of a few copies cost
    more than the rows); when the last ties the `depth`-th, more are fetched (x4, up to TIE_ROWS) until
    the tie is whole, then every row is ordered by score and id and cut. tied_past_cut, when given,
    receives the rows the cut left out that tie the last one kept (id -> row): their score is as good,
    so a candidate another list brings keeps it (which of equals make the cut is only the ids' order)."""
    limit = 4 * depth + 1
    while True:
        rows = row_dicts(query_with_limit(limit).to_arrow())
        rows.sort(key=key)
        if len(rows) < limit or limit >= TIE_ROWS or depth <= 0 or key(rows[depth - 1])[0] != key(rows[-1])[0]:
            if tied_past_cut is not None and 0 < depth < len(rows):
                last = key(rows[depth - 1])[0]
                tied_past_cut.update((row["id"], row) for row in rows[depth:] if key(row)[0] == last)
            return rows[:depth]
        limit = min(limit * 4, TIE_ROWS)


def where_clause(roles: Iterable[str] | None = None, conversation: str | tuple[str, ...] | None = None,
                 tags: Iterable[str] = (), since=None, until=None) -> str:
    """A LanceDB filter on the table, as row_filter.RowFilter renders it (the one place that knows how
    the columns are stored: tags as "|a|b|" so that a tag is one LIKE, times as UTC microseconds in
    created_us). conversation: one, or a tuple of them (any of)."""
    from memvault.store.row_filter import RowFilter, micros

    conversations = conversation if isinstance(conversation, tuple) or conversation is None else (conversation,)
    return RowFilter(roles=tuple(roles) if roles is not None else None, conversations=conversations,
                     tags=tuple(tags), since_us=micros(since), until_us=micros(until)).sql()


def _with_told_columns(rows):
    """Arrow rows with the told columns, empty where a table from before issue 45 has none."""
    import pyarrow as pa

    for name, kind in TOLD_FIELDS(pa):
        if name not in rows.column_names:
            rows = rows.append_column(name, pa.nulls(rows.num_rows, kind))
    return rows


def id_clause(ids: Iterable[str]) -> str:
    """A LanceDB filter: the rows of these ids."""
    return "id IN (" + ", ".join(_sql_str(i) for i in ids) + ")"


def meta_clause(key: str, value: Any = None) -> str:
    """A filter on one front-matter key of the `meta` column (the JSON `_row` writes): the key has
    this value (a string, true or false), or, without one, the key is there."""
    pattern = '"' + key + '": ' + (json.dumps(value) if value is not None else "")
    return f"meta LIKE {_sql_str('%' + _like_escape(pattern) + '%')} ESCAPE '\\'"
