"""Model fixtures, shared through conftest.py with ``from fixtures_models import *``."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossencoder_fixture import build_tiny_cross_encoder

__all__ = ["embedder", "tiny_reranker_dir"]


@pytest.fixture(scope="session")
def embedder():
    """The bundled default embedder, loaded once per test session (get_embedder caches it)."""
    from memvault.store.models import get_embedder

    return get_embedder()


@pytest.fixture(scope="session")
def tiny_reranker_dir(tmp_path_factory) -> Path:
    """A local cross-encoder folder with the logits documented in crossencoder_fixture."""
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-reranker"))
