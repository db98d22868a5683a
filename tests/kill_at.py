"""Run the memvault CLI and SIGKILL it (or pause it) at an exact point of its work.

    KILL_AT='memvault/store/state.py:write'    python tests/kill_at.py add "some text"
    KILL_AT='c:posix.replace'              ...   # before the first os.replace (a builtin call)
    KILL_AT='memvault/store/gitrepo.py:commit_paths;1;0.3'  # 0.3 s after the 1st call: inside git
    PAUSE_AT='memvault/store/models.py:embed;1;20'        # sleep 20 s there instead of dying
    PAUSE_AT='memvault/moving/sync.py:_push;1;/tmp/go'   # wait there until /tmp/go exists (at most 300 s)

A spec is ``<where>[;<nth call>[;<delay seconds>]]``; ``<where>`` is ``<file suffix>:<function>``
for a Python function or ``c:<module>.<name>`` for a builtin (posix.replace, posix.fsync...).
Stages chain with ``>``: ``memvault/store/gitrepo.py:commit_paths>c:_posixsubprocess.fork_exec;2;0.005``
is 5 ms after the second process started once commit_paths began (`git commit`).
The kill is a real SIGKILL of the whole process group when this process leads one (start it
with start_new_session=True), so git children die with it, as they do when a terminal or a
cron job is killed. Before dying it writes ``kill_at: <spec>`` to stderr.

Used by tests/test_reliability.py and bench/torture.py; the product has no test hooks.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time


def _parse(spec: str):
    where, *rest = spec.split(";")
    nth = int(rest[0]) if rest and rest[0] else 1
    delay = float(rest[1]) if len(rest) > 1 and rest[1] else 0.0
    if where.startswith("c:"):
        return "c_call", None, where[2:], nth, delay
    suffix, _, func = where.rpartition(":")
    return "call", suffix, func, nth, delay


def _die(spec: str) -> None:
    sys.stderr.write(f"kill_at: {spec}\n")
    sys.stderr.flush()
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _install(spec: str, action) -> None:
    stages = [_parse(part) for part in spec.split(">")]
    stage = 0
    seen = 0
    fired = threading.Event()

    def hook(frame, event, arg):
        nonlocal stage, seen
        kind, suffix, name, nth, delay = stages[stage]
        if fired.is_set() or event != kind:
            return
        if kind == "call":
            code = frame.f_code
            if code.co_name != name or not code.co_filename.endswith(suffix):
                return
        elif f"{getattr(arg, '__module__', None)}.{getattr(arg, '__name__', None)}" != name:
            return
        seen += 1
        if seen < nth:
            return
        if stage + 1 < len(stages):  # an earlier stage: arm the next one
            stage, seen = stage + 1, 0
            return
        fired.set()
        if delay:
            threading.Timer(delay, action).start()
        else:
            action()

    sys.setprofile(hook)
    threading.setprofile(hook)


def _import_heavy_first() -> None:
    """A profile hook slows every Python call (imports double a command's time). Every kill point
    is past the imports, which the product makes lazily on the same path: make them first."""
    import importlib

    for name in ("numpy", "pyarrow", "git", "yaml", "onnxruntime", "fastembed", "watchdog.observers",
                 "memvault.faces.cli", "memvault.store.index", "memvault.store.models", "memvault.store.gitrepo", "memvault.reading.retrieval"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from memvault.store import index

    index.import_lancedb()  # as the command would (a plain `import lancedb` loads what it defers)
    if "chat" in sys.argv:
        from memvault.store import llm

        llm._lib()  # litellm, imported the way memvault does it (no cost-map download)


def main() -> None:
    kill = os.environ.get("KILL_AT")
    pause = os.environ.get("PAUSE_AT")
    if kill or pause:
        _import_heavy_first()
    if kill:
        _install(kill, lambda: _die(kill))
    if pause:
        *head, seconds = pause.split(";")
        spec = ";".join(head)

        def sleep() -> None:
            sys.stderr.write(f"pause_at: {spec}\n")
            sys.stderr.flush()
            try:
                time.sleep(float(seconds))
            except ValueError:  # a path: go on once the test creates it
                deadline = time.monotonic() + 300
                while not os.path.exists(seconds) and time.monotonic() < deadline:
                    time.sleep(0.05)

        _install(spec, sleep)
    from memvault.faces.cli import main as cli_main

    sys.argv = ["memvault", *sys.argv[1:]]
    cli_main()


if __name__ == "__main__":
    main()
