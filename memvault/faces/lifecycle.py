"""The life of a long-lived face (serve, mcp, and those to come): one start and one stop for all
(docs/design.md, "The library API and its faces" and "Stopping a long-running command").

    life = LongLived.open(state.open, "serve", notice)   # stop signals first, then the vault (watch=True)
    life.warm_up(llm=True)            # models, index, litellm: each failure one line; a stop meanwhile: Stopped
    life.catch_up()                   # the learning owed to turns from before the start, each change a line
    ... serve ...
    life.leave()                      # take the vault lock (no thread of ours mid-change), exit 0 at once

- Start: `stop_on_signals()` before anything (a signal while it starts is not lost); the vault
  opened with watch=True (hand edits and other processes' writes seen at the next read).
- Warm-up: `Memvault.warm` (the embedding model, the reranker, the index and its caches) and, for a
  face that talks to the LLM, `warm_llm` (litellm's import: seconds), in that order, each failure a
  notice (the calls that need it will say what is wrong). In the main thread it stops between steps
  when a stop signal came (`signals.Stopped`); a face that warms in a thread (mcp: the handshake
  first) calls `warm_up_in_thread`, and holds its calls until `ready` is set: two threads importing
  numpy, lancedb and onnxruntime at once can leave a module half initialised for good.
- Catch-up: `Memvault.learn(before=<the start>)` once warmed, never before any new turn's upkeep.
- Stop: `leave()` takes the vault lock (a change under way holds it, and finishes first), keeps it
  until the process is gone, and leaves with `os._exit(0)`: the native libraries' teardown (ONNX
  Runtime, LanceDB) can take seconds, and threads may still wait for the model. `leave_on_signal`
  is the handler for a face whose event loop a signal cannot wind down (mcp); a second signal ends
  the process at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, Callable

from memvault.errors import MemvaultError
from memvault.store import files, signals

# At most this long for a change of this process under way when the face stops (they take a moment).
STOP_GRACE = 30.0


def one_line(exc: BaseException, limit: int = 300) -> str:
    return " ".join(str(exc).split())[:limit]


class LongLived:
    """A long-lived face over one open vault (see the module's doc)."""

    def __init__(self, vault, name: str, notice: Callable[[str], None]):
        self.vault, self.name, self.notice = vault, name, notice
        self.started = files.utcnow()  # turns from before this that were never learned from are caught up
        self.ready = threading.Event()  # set once the warm-up is over (or failed)
        self._warming = threading.Lock()
        self._held: Any = None  # the vault lock, once taken to leave (collected, it would be released)
        self._leaving = False

    @classmethod
    def open(cls, open_vault: Callable[..., Any], name: str, notice: Callable[[str], None]) -> "LongLived":
        """Stop signals first (a signal while it starts is then not lost: `signals.requested`), then
        the vault, watched. A face installs its own handler later (`signals.stop_on_signals(h)`)."""
        signals.stop_on_signals()
        return cls(open_vault(watch=True), name, notice)

    # -- start ------------------------------------------------------------------------------------
    def warm_up(self, llm: bool = False, stop_between: bool = True) -> None:
        """Load what the first request would (see the module's doc); `ready` is set at the end."""
        try:
            for step in (self.vault.warm, *((self.vault.warm_llm,) if llm else ())):
                if stop_between and signals.requested.is_set():
                    raise signals.Stopped()
                try:
                    step()
                except Exception as exc:  # the requests that need it will say what is wrong, one line each
                    self.notice(f"memvault: warm-up failed: {one_line(exc)}")
        finally:
            self.ready.set()

    def warm_up_in_thread(self, then: Callable[[], None] | None = None, llm: bool = False) -> None:
        """warm_up on a thread of its own, once (a second call does nothing); then `then` there (the
        catch-up). Calls wait for `ready`."""
        if not self._warming.acquire(blocking=False):
            return

        def run() -> None:
            self.warm_up(llm=llm, stop_between=False)
            if then is not None:
                then()

        threading.Thread(target=run, name=f"memvault-{self.name}-warm-up", daemon=True).start()

    def catch_up(self) -> Any:
        """The learning owed to turns from before the start (`Memvault.learn`: a server stopped before
        its upkeep, a reply cut short, an LLM that was down), each change a notice; a failure is a
        warning (the turns wait for the next start or `memvault learn`). Returns learn.CatchUp or None."""
        from memvault.faces.term import change_lines

        try:
            outcome = self.vault.learn(before=self.started)
        except Exception as exc:  # noqa: BLE001 (said, and the face goes on serving)
            self.notice(f"memvault: warning: catching up on learning failed: {one_line(exc)}")
            return None
        for line in change_lines(outcome.learned.to_json()):
            self.notice(f"memvault: {line}")
        if outcome.turns:
            self.notice(f"memvault {self.name}: caught up learning from {outcome.done} of {len(outcome.turns)} "
                        "turn(s) never learned from")
        if outcome.error:
            self.notice(f"memvault: warning: {outcome.error}")
        return outcome

    # -- stop -------------------------------------------------------------------------------------
    def hold_lock(self, grace: float = STOP_GRACE) -> bool:
        """Take the vault lock and keep it until the process is gone: no thread of this process is
        then half way through a change. False when another process held it all the while (then no
        change of ours is under way either)."""
        try:
            held = self.vault.hold_lock(grace, f"{self.name} (stopping)")
            held.__enter__()
            self._held = held
            return True
        except (MemvaultError, OSError):
            return False

    def exit(self, code: int = 0) -> None:
        """Leave at once (os._exit), stderr flushed."""
        sys.stderr.flush()
        os._exit(code)

    def leave(self, grace: float = STOP_GRACE) -> None:
        """The stop: the vault lock taken and kept, then exit 0."""
        self.hold_lock(grace)
        self.exit(0)

    def leave_on_signal(self, signum: int, _frame: Any = None) -> None:
        """A stop signal's handler for a face whose event loop a signal cannot wind down (mcp: the SDK
        reads stdin on a thread only the client can end): leave once no call of ours is half way
        through a change. A second signal: at once, by its default action."""
        if self._leaving:
            signals.end_now(signum)
        self._leaving = True
        self.leave()

    def leave_on_signals(self) -> None:
        """Install leave_on_signal for the stop signals; a signal that came while starting: leave now."""
        signals.stop_on_signals(self.leave_on_signal)
        if signals.requested.is_set():
            self.leave_on_signal(signal.SIGTERM)
