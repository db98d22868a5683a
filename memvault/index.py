"""The LanceDB sidecar under .memvault/: disposable, rebuilt from the files by content hash.

Sync (docs/design.md, "The index"): walk entries/ (not deleted/), compare (size, mtime_ns) with
state.json, hash only what changed, embed only new or changed text in batches,
drop rows of vanished files, and write state.json atomically *last*, so a sync
killed at any point is finished by the next one (rows are always replaced by
path, which makes redoing a half-done sync harmless).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from memvault import files
from memvault.errors import MemoryFileError
from memvault.files import Memory

TABLE = "memories"
STATE_VERSION = 1
EMBED_BATCH = 256
# Every `add` appends a small fragment to the table; searches slow down with their number (1,000
# one-row fragments: 0.4 s a search instead of 0.02 s), so past this many the sync compacts.
COMPACT_FRAGMENTS = 16
# The BM25 index on index_text: words lower-cased, accents folded, English stop words dropped, stemmed.
FTS_COLUMN = "index_text"
FTS_OPTIONS = {"base_tokenizer": "simple", "language": "English", "with_position": False, "stem": True,
               "remove_stop_words": True, "lower_case": True, "ascii_folding": True}


# lancedb imports the generated REST client of lance-namespace at start (its package __init__
# loads nine API modules with ~150 pydantic models) though a local folder never uses it: 0.65 s
# of the 1.2 s `import lancedb`, paid by every search and add. `import_lancedb` loads that
# package without running its __init__, which runs the first time anything asks the package
# itself for a name (a REST namespace connection), so nothing is lost, only deferred.
_REST_CLIENT = "lance_namespace_urllib3_client"


def import_lancedb():
    """`import lancedb`, without the REST client's package __init__ until someone needs it."""
    if "lancedb" not in sys.modules and _REST_CLIENT not in sys.modules:
        try:
            _defer_package_init(_REST_CLIENT)
        except Exception:  # an unexpected layout: import it the ordinary way
            sys.modules.pop(_REST_CLIENT, None)
    import lancedb

    return lancedb


def _defer_package_init(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return
    package = importlib.util.module_from_spec(spec)  # __path__ set: submodules import as usual
    initialised = False

    def __getattr__(attr: str):  # PEP 562: only called for names the module does not have yet
        nonlocal initialised
        if initialised:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        initialised = True
        spec.loader.exec_module(package)  # the real __init__, into this same module object
        return getattr(package, attr)

    package.__getattr__ = __getattr__
    sys.modules[name] = package


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

    @property
    def drift(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.rebuilt)

    def summary(self) -> str:
        line = (f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, "
                f"{self.unchanged} unchanged, {len(self.skipped)} skipped")
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "added": self.added, "changed": self.changed, "removed": self.removed, "unchanged": self.unchanged,
            "skipped": [{"path": str(e.path), "reason": e.reason} for e in self.skipped],
            "adopted": [str(m.path) for m in self.adopted], "rebuilt": self.rebuilt,
        }


class Index:
    """The index of one vault. Heavy modules are imported only when it is used."""

    def __init__(self, vault, notice: Callable[[str], None] | None = None):
        self.vault = vault
        self.root: Path = vault.root
        self.dir = vault.sidecar / "index"
        self.state_path = vault.sidecar / "state.json"
        self.notice = notice or (lambda message: None)
        self._db = None
        self._table = None
        self._embedder = None

    # -- model -----------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            from memvault.models import get_embedder

            self._embedder = get_embedder(self.vault.settings.embedding_model)
        return self._embedder

    def model_info(self) -> dict[str, Any]:
        """The embedding model's name, dimension and fingerprint; loads the model only when they
        are not known up front (so a sync with nothing to embed never loads it)."""
        if self._embedder is None:
            from memvault.models import embedder_identity

            known = embedder_identity(self.vault.settings.embedding_model)
            if known is not None:
                return known
        e = self.embedder
        return {"name": e.name, "dim": e.dim, "fingerprint": e.fingerprint}

    # -- state -----------------------------------------------------------------
    def known_files(self) -> dict[str, dict[str, Any]]:
        """state.json's record of the files the index has read: {relative path: {"id", "size",
        "mtime_ns", "sha256"}}. Empty, silently, when there is none or it cannot be read: a caller
        then reads the files themselves."""
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        known = state.get("files") if isinstance(state, dict) and state.get("version") == STATE_VERSION else None
        return known if isinstance(known, dict) else {}

    def load_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
            if state.get("version") == STATE_VERSION and isinstance(state.get("files"), dict):
                return state
            self.notice(f"index state {self.state_path} has an unknown format; rebuilding the index")
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            self.notice(f"index state {self.state_path} is unreadable ({exc}); rebuilding the index")
        return {"version": STATE_VERSION, "model": None, "files": {}}

    def save_state(self, state: dict[str, Any]) -> None:
        files.atomic_write(self.state_path, json.dumps(state, separators=(",", ":"), sort_keys=True))

    # -- table -----------------------------------------------------------------
    def _connect(self):
        if self._db is None:
            lancedb = import_lancedb()
            self.dir.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.dir))
        return self._db

    def table(self, create: bool = False):
        """The open table, or None when there is none yet (and create is False)."""
        if self._table is not None:
            return self._table
        if not create and not self.dir.is_dir():
            return None  # reading never creates the sidecar
        db = self._connect()
        try:
            self._table = db.open_table(TABLE)
        except (FileNotFoundError, ValueError) as exc:
            if "not found" not in str(exc).lower() and "was not found" not in str(exc).lower() \
                    and not isinstance(exc, FileNotFoundError):
                raise
            if not create:
                return None
            self._table = db.create_table(TABLE, schema=self._schema())
        return self._table

    def refresh(self) -> None:
        """See what other processes wrote since the table was opened (a handle sees its own writes
        only); a long-lived reader calls this after its folder changed."""
        if self._table is not None:
            try:
                self._table.checkout_latest()
            except Exception:  # dropped or rebuilt meanwhile: open it again on the next use
                self._table = None

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
            ("vector", pa.list_(pa.float32(), self.embedder.dim)),
        ])

    def _reset(self) -> None:
        self._table = None
        self._db = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def ensure_fts(self, table) -> None:
        """A BM25 index on index_text; rows added later are still searched (unindexed rows are scanned)."""
        indices = {getattr(i, "name", "") for i in table.list_indices()}
        if f"{FTS_COLUMN}_idx" not in indices and table.count_rows() > 0:
            import warnings

            with warnings.catch_warnings():  # the sync API's replacement takes vector indexes only
                warnings.simplefilter("ignore", DeprecationWarning)
                table.create_fts_index(FTS_COLUMN, replace=True, **FTS_OPTIONS)

    # -- sync ------------------------------------------------------------------
    def sync(self, full: bool = False, paths: Iterable[Path] | None = None, adopt: bool = False,
             check_only: bool = False, progress: Callable[[int, int], None] | None = None,
             verify: bool = False) -> SyncReport:
        """Bring the index in line with the files. The caller holds the vault lock unless check_only.

        paths: only look at these files (what a command just wrote or removed).
        adopt: give files without front matter a front matter (reindex does; search does not).
        check_only: report drift, write nothing.
        verify: read every row's path and hash and compare them with state.json (reindex and
        --check do; other syncs only compare the row count, which is free).
        """
        report = SyncReport()
        state_existed = self.state_path.exists()
        state = self.load_state()
        model = self.model_info() if not check_only or state.get("model") else None
        if full:
            report.rebuilt = "--full"
        elif state["files"] and state.get("model") != model:
            old = (state.get("model") or {}).get("name", "an unknown model")
            report.rebuilt = f"index was built with {old}; rebuilding with {model['name']}"
        stray: set[str] = set()  # paths of rows state.json does not vouch for (a sync cut short)
        repaired: list[str] = []  # state entries whose row is missing, doubled or stale
        if not report.rebuilt and (not check_only or verify):
            try:
                table = self.table() if not check_only or self.dir.is_dir() else None
                if table is None and state["files"]:
                    report.rebuilt = f"index table in {self.dir} is missing; rebuilding it"
                elif table is not None and FTS_COLUMN not in table.schema.names:
                    report.rebuilt = (f"the index in {self.dir} was built by an older memvault (no {FTS_COLUMN} "
                                      "column: what search reads for a chat turn); rebuilding it, once")
                elif table is not None:
                    rows = table.count_rows()
                    if rows and not state["files"]:
                        report.rebuilt = f"index state {self.state_path} is missing; rebuilding the index"
                    elif verify or rows != len(state["files"]):
                        repaired, stray = self._mismatch(table, state["files"])
            except Exception as exc:  # a corrupt sidecar is rebuilt, never fatal
                report.rebuilt = f"index in {self.dir} is unreadable ({type(exc).__name__}); rebuilding it"
        if report.rebuilt:
            if check_only:
                return report
            if report.rebuilt != "--full":
                self.notice(f"memvault: {report.rebuilt}")
            # state.json goes first: a rebuild killed half-way must not leave a state that vouches
            # for rows the new table does not have yet.
            self.state_path.unlink(missing_ok=True)
            self._reset()
            state = {"version": STATE_VERSION, "model": model, "files": {}}
            paths = None
        elif stray:
            if not check_only:
                self.notice(f"memvault: the index in {self.dir} did not match its files "
                            f"({len(repaired)} rows missing or stale, {len(stray) - len(repaired)} stray); "
                            "repairing it")
                for chunk in _chunks(sorted(stray), 500):
                    self.table().delete("path IN (" + ", ".join(_sql_str(p) for p in chunk) + ")")
            paths = None  # look at every file: those on disk are indexed again below

        known: dict[str, dict[str, Any]] = state["files"]
        touched = bool(report.rebuilt or stray) or state.get("model") != model or not self.state_path.exists()
        if paths is None:
            on_disk = _scan_entries(self.root)
            scope = set(known) | set(on_disk)
            if not state_existed and not report.rebuilt and on_disk and not check_only:
                self.notice(f"memvault: no index in {self.vault.sidecar}; building it from {len(on_disk)} files")
            report.removed.extend(sorted(p for p in stray if p not in on_disk))
        else:
            on_disk = {}
            scope = set()
            for p in paths:
                rel = self.vault.relative(Path(p))
                scope.add(rel)
                live = Path(p)
                if files.DELETED not in Path(rel).parts[2:3] and live.is_file() and files.is_memory_file(live) \
                        and not live.is_symlink():
                    on_disk[rel] = live

        ids_in_use = {entry["id"]: rel for rel, entry in known.items() if rel not in scope or rel in on_disk}
        to_index: list[tuple[str, Memory, str, os.stat_result]] = []
        for rel in sorted(scope):
            path = on_disk.get(rel)
            entry = known.get(rel)
            if path is None:
                if entry is not None:
                    report.removed.append(rel)
                    report.ids[rel] = entry["id"]
                    if not check_only:
                        known.pop(rel)
                continue
            try:
                stat = os.stat(path)
            except OSError:
                continue
            if entry and entry["size"] == stat.st_size and entry["mtime_ns"] == stat.st_mtime_ns:
                report.unchanged += 1
                continue
            path = Path(path)
            touched = True
            try:
                memory, adopted, digest, stat = self._read(path, adopt and not check_only, report)
            except MemoryFileError as exc:
                report.skipped.append(exc)
                if entry is not None:  # a file that broke: its old row goes, the file stays on disk
                    report.removed.append(rel)
                    if not check_only:
                        known.pop(rel)
                continue
            if entry and entry["sha256"] == digest:
                report.unchanged += 1
                if not check_only:
                    entry.update(size=stat.st_size, mtime_ns=stat.st_mtime_ns)
                continue
            owner = ids_in_use.get(memory.id)
            if owner is not None and owner != rel:
                report.skipped.append(MemoryFileError(path, f"id {memory.id} is already used by {owner}"))
                continue
            ids_in_use[memory.id] = rel
            (report.changed if entry else report.added).append(rel)
            report.ids[rel] = memory.id
            to_index.append((rel, memory, digest, stat))

        if check_only:
            return report
        contexts = self._turn_contexts(known, report, to_index)
        self._apply(known, report, to_index, progress, contexts)
        state["model"] = model
        if touched or report.removed:  # a no-op sync (every search) writes nothing
            self.save_state(state)
        return report

    def sync_paths(self, paths: Iterable[Path], progress: Callable[[int, int], None] | None = None) -> SyncReport:
        """Index exactly the files a command just wrote or removed (the caller holds the lock)."""
        return self.sync(paths=paths, progress=progress)

    def same_texts(self, conversation: str, role: str, texts: list[str]) -> dict[str, dict[str, Any]]:
        """{text: row} for the live rows of this conversation and role whose text is one of `texts`."""
        table = self.table()
        found: dict[str, dict[str, Any]] = {}
        if table is None:
            return found
        for chunk in _chunks(sorted(set(texts)), 200):
            where = (where_clause((role,), conversation) + " AND text IN ("
                     + ", ".join(_sql_str(t) for t in chunk) + ")")
            for row in table.search().where(where).select(["id", "path", "text"]).limit(None).to_list():
                found.setdefault(row["text"], row)
        return found

    def remember_notice(self, key: str, message: str) -> bool:
        """Whether `message` is news for this vault (not what was said last time under `key`); news
        is remembered in state.json, under the lock when it is free (else it is said again later)."""
        from memvault.lock import vault_lock

        state = self.load_state() if self.state_path.exists() else None
        if state is None or state.get("notices", {}).get(key) == message:
            return state is None
        try:
            with vault_lock(self.vault.lock_path, timeout=0, holder="search (notice)") as got:
                if got:
                    state = self.load_state()
                    state.setdefault("notices", {})[key] = message
                    self.save_state(state)
        except OSError:
            pass  # a read-only vault: say it every time
        return True

    def nearest(self, vector, k: int, roles: Iterable[str] | None = None,
                conversation: str | None = None) -> list[dict[str, Any]]:
        """The k rows closest to `vector` (cosine distance in `_distance`), filtered."""
        table = self.table()
        if table is None or k <= 0:
            return []
        return (table.search([float(x) for x in vector], vector_column_name="vector").metric("cosine")
                .where(where_clause(roles, conversation), prefilter=True).limit(k).to_list())

    def rows(self, columns: list[str], roles: Iterable[str] | None = None,
             conversation: str | None = None) -> list[dict[str, Any]]:
        """Every row matching the filter, with these columns only."""
        table = self.table()
        if table is None:
            return []
        return table.search().where(where_clause(roles, conversation)).select(columns).limit(None).to_list()

    def _mismatch(self, table, known: dict[str, dict[str, Any]]) -> tuple[list[str], set[str]]:
        """Compare the rows with state.json. Entries whose row is missing, doubled or stale are
        dropped from `known`, so the sync indexes them again. Returns those entries, and the paths
        of every row that `known` no longer vouches for (to delete: stray rows and repaired ones)."""
        data = table.search().select(["path", "sha256"]).limit(None).to_arrow().to_pydict()
        rows: dict[str, list[str]] = {}
        for path, digest in zip(data["path"], data["sha256"]):
            rows.setdefault(path, []).append(digest)
        repaired = [rel for rel, entry in known.items() if rows.get(rel) != [entry["sha256"]]]
        for rel in repaired:
            known.pop(rel)
        stray = {path for path in rows if path not in known}
        return repaired, stray | set(repaired)

    def _read(self, path: Path, adopt: bool, report: SyncReport):
        # One read: the hash is of the very bytes that were parsed, the stat from before reading
        # them (a file changed in between then looks changed to the next sync, never unchanged).
        memory, adopted, raw, stat = files.read_memory_raw(path, self.root)
        if adopted:
            report.adopted.append(memory)
            if adopt:
                files.write_memory(self.root, memory, path)
                raw, stat = path.read_bytes(), path.stat()  # rewritten with front matter: that is what is indexed
        return memory, adopted, hashlib.sha256(raw).hexdigest(), stat

    def _turn_contexts(self, known, report: SyncReport, to_index):
        """What BM25 reads for the memories to index (turn_context.py), and the turns whose context
        changed with them (the turns after a turn added, changed or removed), added to to_index."""
        from memvault.turn_context import TurnContexts

        contexts = TurnContexts(self.root, {rel: memory for rel, memory, _, _ in to_index})
        touched = [rel for rel, *_ in to_index] + report.removed
        for rel in sorted(contexts.after(touched)):
            if rel not in known:  # not indexed (yet): a sync of every file reads it anyway
                continue
            try:
                memory, _adopted, digest, stat = self._read(self.root / rel, False, SyncReport())
            except MemoryFileError:
                continue
            to_index.append((rel, memory, digest, stat))
            contexts.pending[rel] = memory
            contexts.refreshed.append(rel)
        return contexts

    def _apply(self, known, report: SyncReport, to_index, progress, contexts=None) -> None:
        stale = report.removed + report.changed + (contexts.refreshed if contexts is not None else [])
        table = self.table(create=bool(to_index))
        if table is not None and stale:
            for chunk in _chunks(stale, 500):
                table.delete("path IN (" + ", ".join(_sql_str(p) for p in chunk) + ")")
        if table is not None and to_index:
            # Redoing an interrupted sync: rows for these paths may already be there.
            added = set(report.added)  # a list: `in` on it made a 100,000-file sync quadratic
            new_paths = [rel for rel, *_ in to_index if rel in added]
            for chunk in _chunks(new_paths, 500):
                table.delete("path IN (" + ", ".join(_sql_str(p) for p in chunk) + ")")
        done = 0
        # Similar lengths in one batch: the embedder pads a batch to its longest text.
        to_index = sorted(to_index, key=lambda item: len(item[1].text))
        for batch in _chunks(to_index, EMBED_BATCH):
            vectors = self.embedder.embed([m.text for _, m, _, _ in batch])
            table.add(self._arrow_rows(batch, vectors, contexts))
            for rel, memory, digest, stat in batch:
                known[rel] = {"id": memory.id, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
            done += len(batch)
            if progress:
                progress(done, len(to_index))
        if table is not None and (to_index or stale):
            self.ensure_fts(table)
            if len(to_index) > 1000 or report.rebuilt or _fragments(table) >= COMPACT_FRAGMENTS \
                    or _bm25_behind(table):
                table.optimize()  # compaction into one fragment, the new rows into the BM25 index


    def _arrow_rows(self, batch, vectors, contexts=None):
        """One Arrow table for a batch: the vectors go in as one float32 buffer, not as Python floats."""
        import numpy as np
        import pyarrow as pa

        rows = [_row(rel, memory, digest, None, contexts.index_text(rel, memory) if contexts else memory.text)
                for rel, memory, digest, _ in batch]
        schema = self._schema()
        columns = {name: [row[name] for row in rows] for name in schema.names if name != "vector"}
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
        columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, self.embedder.dim)
        return pa.Table.from_pydict(columns, schema=schema)


def _row(rel: str, memory: Memory, digest: str, vector, index_text: str | None = None) -> dict[str, Any]:
    created = memory.created_at
    return {
        "id": memory.id,
        "path": rel,
        "role": memory.role,
        "conversation_id": memory.conversation_id,
        "created_us": int(created.timestamp() * 1_000_000),
        "created_at": files.format_time(created),
        "tags": "|" + "|".join(memory.tags) + "|" if memory.tags else "",
        "text": memory.text,
        "index_text": memory.text if index_text is None else index_text,
        "sha256": digest,
        "meta": json.dumps({k: v for k, v in memory.front_matter().items() if k not in files.CORE_KEYS},
                           default=str, ensure_ascii=False),
        "vector": None if vector is None else [float(x) for x in vector],
    }


def _bm25_behind(table) -> bool:
    """Whether the BM25 index has left out 1% or more of the rows. BM25 scores the rows it indexed
    with the word counts of its own rows and the others with all of them, so a fact added to a
    small vault would lose to an older one of the same words (a vault of 7: by 30%); a vault of
    10,000 takes its new rows in once per 100 adds (optimize: ~10 ms small, more at 10,000)."""
    try:
        index = next(i for i in table.list_indices() if getattr(i, "name", "") == f"{FTS_COLUMN}_idx")
        unindexed, indexed = int(index.num_unindexed_rows), int(index.num_indexed_rows)
    except Exception:  # no BM25 index yet, or a lancedb without these counts
        return False
    return unindexed > 0 and unindexed * 100 >= indexed


def _fragments(table) -> int:
    """How many data fragments the table has (each add or delete of a sync makes one more)."""
    try:
        return int(table.stats()["fragment_stats"]["num_fragments"])
    except Exception:  # an older lancedb without stats(): compact by the other rules only
        return 0


def _scan_entries(root: Path) -> dict[str, str]:
    """{relative posix path: absolute path} of the files files.walk_entries yields (live entries
    only, no dot folders, files.is_memory_file names, a symlinked folder as itself so that reading
    it reports it, never entered), with plain strings: every search walks the vault, and Path
    objects cost more than the walk itself on 10,000 files."""
    base = os.path.join(os.fspath(root), files.ENTRIES)
    if not os.path.isdir(base):
        return {}
    cut = len(os.fspath(root)) + 1
    found: dict[str, str] = {}
    for folder, dirs, names in os.walk(base, followlinks=False):
        parts = folder[len(base) + 1:].split(os.sep) if len(folder) > len(base) else []
        if len(parts) >= 2 and parts[1] == files.DELETED:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in dirs:
            full = os.path.join(folder, name)
            if os.path.islink(full):
                found[full[cut:].replace(os.sep, "/")] = full
        for name in names:
            if name.endswith(".md") and not name.startswith((".", "#", "~")):
                full = os.path.join(folder, name)
                found[full[cut:].replace(os.sep, "/")] = full
    return found


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def where_clause(roles: Iterable[str] | None = None, conversation: str | None = None, tags: Iterable[str] = (),
                 since=None, until=None) -> str:
    """A LanceDB filter on the table: the one place that knows how the columns are stored (tags as
    "|a|b|" so that a tag is one LIKE, times as UTC microseconds in created_us)."""
    clauses = []
    if roles is not None:
        clauses.append("role IN (" + ", ".join(_sql_str(r) for r in roles) + ")")
    if conversation is not None:
        clauses.append(f"conversation_id = {_sql_str(conversation)}")
    for tag in tags:
        clauses.append(f"tags LIKE {_sql_str('%|' + _like_escape(tag) + '|%')} ESCAPE '\\'")
    if since is not None:
        clauses.append(f"created_us >= {int(since.timestamp() * 1_000_000)}")
    if until is not None:
        clauses.append(f"created_us <= {int(until.timestamp() * 1_000_000)}")
    return " AND ".join(clauses) or "true"


def _like_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
