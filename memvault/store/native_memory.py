"""Native memory of long-lived processes (`serve`, `mcp`, `reindex --watch`, a library user's
`open_vault(watch=True)`), which must not creep up over thousands of requests.

Two things (besides LanceDB's caches, bounded in index.py) made `memvault serve` on 10,000
memories grow by 25% from its 100th request to its 1,000th (bench/README.md, "The OpenAI proxy"),
neither a leak of memvault's own:

- glibc gives a thread that finds the other arenas busy an arena of its own, up to eight per core.
  LanceDB's and ONNX Runtime's worker threads allocate large short-lived buffers (a table's
  `optimize`, a query's batches) across those arenas, and what they free there stays fragmented.
  Bounded to two arenas, searches take the same time.
- ONNX Runtime's CPU arena keeps the largest buffers any inference needed, growing in steps when a
  longer text than before comes in. Without it a query embeds in the same time (8.0 against 8.3 ms);
  a bulk embedding costs ~10% more CPU, so a short-lived command (`add --jsonl`, `reindex --full`)
  keeps the arena.

- pyarrow allocates from the mimalloc it bundles, which keeps the pages its threads freed: the copy of
  the table (dense_copy.py) is Arrow rows rebuilt at each write, on whichever thread wrote, and at 10,000
  memories mimalloc held ~210 MB after 1,000 requests for ~38 MB of live Arrow buffers (bench/README.md,
  "Session 9"). On malloc (its arenas bounded above) the same requests hold what they use.

A short-lived command ends before either matters, so only long-lived processes ask for this.

CPU too (issue 41): ONNX Runtime's thread pool spins after each inference, waiting for the next (10-30
ms of CPU after each of a server's few-text embeddings, two a chat, taken from the other requests).
A long-lived process's models run an inference on the calling thread (one intra-op thread): a query
embeds in 7-10 ms instead of 16-23 (the pool's start and spin on 2 cores), and requests run side by
side on their own threads; a bulk embedding in such a process (a large POST of memories) uses one
core instead of all.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h
ARENAS = 2

_long_lived = False
_arenas_bounded = False


def settle_for_long_life() -> None:
    """Mark this process long-lived: malloc arenas bounded from now on, Arrow's buffers on malloc, and
    the models loaded from now on without ONNX Runtime's CPU arena (models.py). Best called before
    anything loads."""
    global _long_lived
    _long_lived = True
    bound_malloc_arenas()
    arrow_on_malloc()


def long_lived() -> bool:
    """Whether settle_for_long_life was called: a server, an MCP server, the agent."""
    return _long_lived


def bound_malloc_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas from now on (threads that start later share them), with
    glibc; whether it is in effect. Left alone where MALLOC_ARENA_MAX is set (the user chose) and
    on other C libraries."""
    global _arenas_bounded
    if _arenas_bounded:
        return True
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)  # the C library the process already uses
        libc.gnu_get_libc_version  # glibc's own symbol: musl's mallopt does nothing  # noqa: B018
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _arenas_bounded = mallopt(M_ARENA_MAX, arenas) == 1
    return _arenas_bounded


def arrow_on_malloc() -> bool:
    """pyarrow's default memory pool (every buffer memvault's Arrow calls make) the C library's malloc
    instead of the mimalloc pyarrow bundles; whether in effect. Left alone where ARROW_DEFAULT_MEMORY_POOL
    is set (the user chose). Buffers made before stay where they are; pyarrow is imported here, by a
    process that is about to use it anyway (LanceDB's rows are Arrow)."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True


def onnx_session_options() -> dict:
    """fastembed's session options for a model loaded now: no CPU arena and one thread (no spinning
    pool) in a long-lived process."""
    return {"enable_cpu_mem_arena": False, "threads": 1} if _long_lived else {}
