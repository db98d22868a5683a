"""`memvault hook <agent>`: one event of a coding agent's hooks in (JSON on stdin), the agent's hook
answer out (issue 42; docs/design.md, "Coding agents"). Claude Code, Codex and Gemini CLI.

A thin face: it reads the event, makes the library call the event asks for (Memvault.agent_context,
prompt_context, store_exchange) and renders the answer in the agent's format. It is never in the agent's
way: any failure (bad input, a vault it cannot open, a lock, an LLM that is down) is one line in
`.memvault/hook.log`, nothing on stdout but the answer, exit 0. The time limit, and running an event
that writes in the background, are hook_client.py's (before anything here is imported).

What each event does (README, "Coding agents" lists them per agent):
- a session's start: the project's context (summary, open decisions, recent episodes and notes) as
  `additionalContext`;
- a prompt: the memories that fit it, as the chat's dated block, as `additionalContext`; nothing when
  nothing fits;
- the end of a turn: the exchange stored from the agent's transcript (and the final text its hook
  gives), then the upkeep (learning) run by a process of its own (`memvault hook-upkeep`);
- a compaction, a session's end: every exchange of the transcript not stored yet, then the upkeep,
  which also closes the session's episode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from memvault.errors import UsageError
from memvault.faces import hook_log

# Each agent's hook events and what memvault does at each.
EVENTS: dict[str, dict[str, str]] = {
    "claude-code": {"SessionStart": "start", "UserPromptSubmit": "prompt", "Stop": "stop", "PreCompact": "compact",
                    "SessionEnd": "end"},
    "codex": {"SessionStart": "start", "UserPromptSubmit": "prompt", "Stop": "stop", "PreCompact": "compact",
              "SessionEnd": "end"},  # Codex dispatches SessionEnd from 0.146 (root sessions only)
    "gemini": {"SessionStart": "start", "BeforeAgent": "prompt", "AfterAgent": "stop", "PreCompress": "compact",
               "SessionEnd": "end"},
}
CLOSE = {"compact": "compact", "end": "session-end"}  # the episode boundary of each closing event


@dataclass
class Event:
    """What memvault reads of a hook event, whatever the agent."""

    agent: str
    name: str
    session: str | None = None
    cwd: str = "."
    transcript: str | None = None
    prompt: str | None = None
    reply: str | None = None  # the agent's final text, where the hook gives it (Stop, AfterAgent)
    turn: str | None = None  # the agent's id of the prompt (Claude Code's prompt_id, Codex's turn_id)


def parse(agent: str, raw: bytes) -> Event:
    """The event of a hook's stdin; a UsageError saying what is wrong with it."""
    if agent not in EVENTS:
        raise UsageError(f"unknown agent {agent!r} (one of {', '.join(EVENTS)})", params="agent")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"the hook event on stdin is not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("hook_event_name"), str):
        raise UsageError("the hook event on stdin has no hook_event_name")

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and value else None

    return Event(agent=agent, name=data["hook_event_name"], session=text("session_id"),
                 cwd=text("cwd") or os.getcwd(), transcript=text("transcript_path"), prompt=text("prompt"),
                 reply=text("last_assistant_message") or text("prompt_response"),
                 turn=text("prompt_id") or text("turn_id"))


def render(agent: str, event: str, context: str) -> str:
    """The agent's hook answer carrying `context` for the model ("" for none; Gemini CLI reads `{}`)."""
    if not context:
        return hook_log.NOTHING.get(agent, "")
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}},
                      ensure_ascii=False)


def handle(vault, event: Event, spawn: Callable[[], None]) -> str:
    """Carry the event out against the vault: the context to inject ("" for none). spawn() starts the
    upkeep process once something was queued for it."""
    action = EVENTS[event.agent].get(event.name)
    if action is None:
        raise UsageError(f"{event.name} is not an event memvault answers for {event.agent} "
                         f"(it answers {', '.join(EVENTS[event.agent])})")
    conversation = vault.project_conversation(event.cwd)
    if action == "start":
        return vault.agent_context(conversation).text
    if action == "prompt":
        if not event.prompt:
            raise UsageError(f"{event.name} event without a prompt")
        return vault.prompt_context(event.prompt, conversation=conversation, agent=event.agent,
                                    session=event.session).text
    close = CLOSE.get(action)
    if action == "stop" or event.transcript:
        stored = vault.store_exchange(conversation=conversation, agent=event.agent, session=event.session,
                                      transcript=event.transcript, cwd=event.cwd, turn=event.turn,
                                      prompt=event.prompt, reply=event.reply if action == "stop" else None,
                                      last_only=action == "stop", close=close)
        if stored.learning_owed or close:
            spawn()
    elif close:
        vault.end_session(conversation, close=close)
        spawn()
    return ""


_children: list[subprocess.Popen] = []  # upkeep processes this (maybe long-lived agent) process started


def spawn_upkeep(root: Path) -> None:
    """`memvault hook-upkeep` in the background (its own session, notices to .memvault/hook.log): the
    learning and closing queued, done without keeping the coding agent waiting."""
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)  # reaped
    log = os.open(root / ".memvault" / hook_log.LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        _children.append(subprocess.Popen(
            [sys.executable, "-m", "memvault", "--vault", str(root), "hook-upkeep"], stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True, close_fds=True, cwd=str(root),
            env={**os.environ, "MEMVAULT_AGENT": "off"}))
    finally:
        os.close(log)


def run(agent: str, raw: bytes, root: Path, open_vault: Callable[..., Any]) -> int:
    """The `hook` command: answer the event on stdout (or nothing), every failure one line in the hook log;
    exit code 0."""
    name = None
    answer = hook_log.NOTHING.get(agent, "")

    def log(message: str, once: bool = False) -> None:
        hook_log.log_line(root, agent, name, message, once)

    try:
        event = parse(agent, raw)
        name = event.name
        vault = open_vault(notice=lambda message: log(message.removeprefix("memvault: "), once=True))
        context = handle(vault, event, lambda: spawn_upkeep(vault.root))
        answer = render(agent, event.name, context)
    except Exception as exc:  # never in the agent's way: said in the log, nothing injected
        from memvault.errors import answer_for

        failure = answer_for(exc)
        log(failure.message if failure.expected else f"{type(exc).__name__}: {exc} (a bug: please report it)")
    if answer:
        sys.stdout.write(answer)
        sys.stdout.flush()
    hook_log.answered.set()
    return 0


def upkeep(root: Path, open_vault: Callable[..., Any]) -> int:
    """`memvault hook-upkeep`: the queued learning and closing, each outcome one line in the hook log."""
    def log(message: str) -> None:
        hook_log.log_line(root, "upkeep", "learning", message)

    try:
        vault = open_vault(notice=lambda message: log(message.removeprefix("memvault: ")))

        def done(conversation: str, outcome) -> None:
            caught, closed = outcome
            if caught.error:
                log(f"{conversation}: learning waits: {caught.error}")
            elif caught.done:
                log(f"{conversation}: learned from {caught.done} turn(s), {len(caught.learned.to_json())} change(s)")
            for episode in closed:
                log(f"{conversation}: episode \"{episode.episode.extra.get('title')}\" closed "
                    f"({len(episode.segment.turns)} turns)")

        vault.hook_upkeep(on_done=done)
    except Exception as exc:
        from memvault.errors import answer_for

        failure = answer_for(exc)
        log(failure.message if failure.expected else f"{type(exc).__name__}: {exc} (a bug: please report it)")
    return 0
