"""A long-lived process settles its native memory (memvault/store/native_memory.py): glibc's malloc
arenas bounded, the embedding model without ONNX Runtime's CPU arena, Arrow's buffers on malloc. What
keeps `memvault serve`'s memory from creeping up (bench/serve.py measures the growth itself).

Each case runs in a fresh Python process, since each is per process and a bound cannot be
lifted; glibc's malloc_stats() reports one "Arena N:" block per arena on stderr."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, seed

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc arenas")

# Twelve threads allocating at once: without a bound, glibc gives most of them an arena of their own.
SCRIPT = r"""
import ctypes, sys, threading
sys.path.insert(0, sys.argv[1])
how, path = sys.argv[2], sys.argv[3]
if how == "watch":
    import memvault
    vault = memvault.open_vault(path, watch=True)
    vault.search("tea")
elif how == "cli":
    import memvault
    memvault.open_vault(path).search("tea")
if how in ("watch", "cli"):
    from memvault.store import models
    session = models.get_embedder()._model.model.model  # fastembed's onnxruntime InferenceSession
    print("onnx cpu arena:", session.get_session_options().enable_cpu_mem_arena)
    print("onnx threads:", session.get_session_options().intra_op_num_threads)
    import pyarrow as pa
    print("arrow pool:", pa.default_memory_pool().backend_name)

start = threading.Barrier(12)

def allocate():
    start.wait()
    kept = []
    for i in range(3000):
        kept.append(bytearray(100_000 + i))
        if len(kept) > 16:
            kept.pop(0)

threads = [threading.Thread(target=allocate) for _ in range(12)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sys.stderr.flush()
ctypes.CDLL(None).malloc_stats()
"""


def settled(how: str, path, env_extra: dict | None = None) -> tuple[int, bool, bool, str]:
    """(malloc arenas after twelve threads allocated, whether the embedder has ONNX Runtime's CPU arena,
    whether it runs on one thread: no pool spinning after each inference, issue 41; the allocator of
    Arrow's buffers)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "ARROW_DEFAULT_MEMORY_POOL")}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(REPO), how, str(path)], capture_output=True,
                          text=True, timeout=300, env={**env, **(env_extra or {})})
    assert done.returncode == 0, done.stderr
    pool = re.search(r"^arrow pool: (\w+)", done.stdout, re.M)
    return (len(re.findall(r"^Arena \d+:", done.stderr, re.M)), "onnx cpu arena: True" in done.stdout,
            "onnx threads: 1" in done.stdout, pool.group(1) if pool else "")


@pytest.mark.slow  # end to end: child processes whose allocator settings are read
def test_a_long_lived_vault_settles_its_memory_where_a_short_lived_one_does_not(vault_dir):
    seed("I drink green tea every morning.")
    arenas, onnx_arena, one_thread, arrow_pool = settled("cli", vault_dir)
    # what it is for: an arena per thread, ONNX Runtime's arena kept, its thread pool for a bulk embedding,
    # pyarrow's own allocator
    assert arenas > 2 and onnx_arena and not one_thread and arrow_pool not in ("", "system")
    arenas, onnx_arena, one_thread, arrow_pool = settled("watch", vault_dir)
    # Arrow's buffers on malloc: mimalloc kept ~170 MB of freed pages after serve's 1,000 requests
    assert arenas <= 2 and not onnx_arena and one_thread and arrow_pool == "system"


@pytest.mark.slow  # end to end: child processes whose allocator settings are read
def test_a_users_own_malloc_arena_max_and_arrow_pool_are_left_alone(vault_dir):
    seed("I drink green tea every morning.")
    arenas, _, _, arrow_pool = settled("watch", vault_dir, {"MALLOC_ARENA_MAX": "6",
                                                            "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"})
    assert arenas > 2 and arrow_pool == "jemalloc"
