"""How a long-running command (`reindex --watch`, `serve`, `mcp`) stops on a signal: docs/design.md,
"Stopping a long-running command".

One rule for the three, in every state: SIGTERM, SIGHUP and SIGINT stop the process, which exits
with status 0. SIGINT stops it even when it started with SIGINT ignored (what a shell does to a
command a script runs in the background): whoever sends it means "stop". SIGHUP stays ignored
when it started ignored (`nohup` asked for exactly that).

The default handler (`stop_on_signals()`) only sets `requested`; the command looks at it where
stopping loses nothing (between two syncs, before it serves), and a wait for the vault lock
(lock.py, through `pause`) raises Stopped at once. A handler that raised in the middle of
whatever the main thread was doing could land in a library that turns it into an error of its
own, or cut a change half way. A second signal ends the process at once, by the signal's
default action, as a kill would (which memvault is built to survive).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable

requested = threading.Event()  # a stop signal has arrived

_hup_was_ignored: bool | None = None
_waits_stop = False  # the default handler is in place: a wait for the vault lock raises Stopped


class Stopped(BaseException):
    """A stop was requested (not an error: a BaseException, like KeyboardInterrupt, so that no
    `except Exception` takes it for a failure)."""


def stop_signals() -> tuple[int, ...]:
    """The signals that stop a long-running command: SIGTERM, SIGINT, and SIGHUP unless the process
    started with it ignored (nohup). Asked before the first handler is installed."""
    global _hup_was_ignored
    if _hup_was_ignored is None:
        _hup_was_ignored = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    return (signal.SIGTERM, signal.SIGINT) + (() if _hup_was_ignored else (signal.SIGHUP,))


def stop_on_signals(handler: Callable[[int, object], None] | None = None) -> None:
    """From now on a stop signal calls handler(signum, frame) in the main thread; by default
    `request_stop`. Call it from the main thread, first thing in the command."""
    global _waits_stop
    _waits_stop = handler is None
    for signum in stop_signals():
        signal.signal(signum, handler or request_stop)


def request_stop(signum: int, _frame=None) -> None:
    """The default handler: the first signal sets `requested`, a second ends the process at once."""
    if requested.is_set():
        end_now(signum)
    requested.set()


def end_now(signum: int) -> None:
    """End the process by the signal's default action (exit status -signum), as a kill would."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def pause(seconds: float) -> None:
    """time.sleep, in a wait that a stop ends: raises Stopped in the main thread of a command that
    stops on signals (stop_on_signals()) once a stop is requested."""
    time.sleep(seconds)  # a signal ends the sleep early only if its handler raises: at most `seconds` late
    if _waits_stop and requested.is_set() and threading.current_thread() is threading.main_thread():
        raise Stopped()
