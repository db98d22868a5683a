"""`memvault setup claude-code|codex|gemini`: memvault's hooks (and its MCP server) written into a coding
agent's own settings (issue 42; docs/design.md, "Coding agents"; README, "Coding agents").

The agent's file is merged, never replaced: the user's own hooks and settings stay as they are, memvault's
entries are recognised by their command (`... hook <agent>`, `... mcp` under the name memvault) so a second
run changes nothing and `--remove` takes exactly those out; the file as it was is kept beside it
(`<file>.memvault.bak`) before any change; `--dry-run` prints the change as a diff and writes nothing.
A file that is not JSON is said, and left alone.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault.errors import UsageError

# Each agent's events memvault answers (faces/hooks.py EVENTS) and how its settings take a hook.
HOOK_EVENTS = {
    "claude-code": ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"),
    "codex": ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"),
    "gemini": ("SessionStart", "BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd"),
}
# The agent's own time limit for one hook run: a backstop only (memvault keeps to hook_timeout itself).
AGENT_TIMEOUT_S = 10
# Where an agent caps an event's limit lower (it warns at every start about a higher one): Codex runs
# SessionEnd within its shutdown, at most 3 s. memvault answers a write at once and does it in the background.
CAPPED_TIMEOUT_S = {("codex", "SessionEnd"): 3}
MCP_NAME = "memvault"
BACKUP_SUFFIX = ".memvault.bak"


@dataclass
class FileChange:
    """One file setup writes: its text before (None: no file) and after, and what changed, in words."""

    path: Path
    before: str | None
    after: str
    said: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(difflib.unified_diff((self.before or "").splitlines(True), self.after.splitlines(True),
                                            str(self.path) if self.before is not None else "/dev/null",
                                            str(self.path)))


@dataclass
class SetupPlan:
    agent: str
    scope: str
    remove: bool
    files: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the user still has to do themselves

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "scope": self.scope, "remove": self.remove, "notes": self.notes,
                "files": [{"path": str(f.path), "changed": f.changed, "changes": f.said,
                           "backup": str(backup_path(f.path)) if f.changed and f.before is not None else None}
                          for f in self.files]}


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def memvault_command(vault_args: list[str]) -> list[str]:
    """How the agent starts memvault: the `memvault` on PATH (absolute: an agent's PATH may differ), else
    this interpreter with -m memvault; then --vault when one was named."""
    found = shutil.which("memvault")
    program = [os.path.abspath(found)] if found else [sys.executable, "-m", "memvault"]
    return [*program, *vault_args]


def is_ours(command: Any, tail: list[str]) -> bool:
    """Whether a hook's or a server's command line is memvault's: it runs memvault and ends with `tail`."""
    if isinstance(command, list):
        words = [str(w) for w in command]
    elif isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            return False
    else:
        return False
    runs_memvault = any(Path(w).name.startswith("memvault") for w in words) or \
        any(a == "-m" and b == "memvault" for a, b in zip(words, words[1:]))
    return runs_memvault and words[-len(tail):] == tail


def _read_json(path: Path) -> tuple[str | None, dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it or move it away, nothing was changed") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object; nothing was changed")
    return text, data


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def merge_hooks(data: dict, agent: str, hook: dict | None) -> tuple[dict, int, int]:
    """The settings with memvault's hooks of `agent` taken out of every event (the user's kept, groups and
    events left empty dropped), then, unless hook is None, one group holding `hook` added to each of the
    agent's events. Returns (settings, taken out, added)."""
    tail = ["hook", agent]
    data = json.loads(json.dumps(data))  # a copy
    hooks = data.get("hooks")
    taken = 0
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            kept_groups = []
            for group in groups:
                if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                    mine = [h for h in group["hooks"] if isinstance(h, dict) and is_ours(h.get("command"), tail)]
                    taken += len(mine)
                    group["hooks"] = [h for h in group["hooks"] if not (isinstance(h, dict) and h in mine)]
                    if not group["hooks"] and mine:
                        continue
                kept_groups.append(group)
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
    added = 0
    if hook is not None:
        if not isinstance(hooks, dict):
            hooks = data["hooks"] = {}
        for event in HOOK_EVENTS[agent]:
            if not isinstance(hooks.get(event), list):
                hooks[event] = []
            mine = dict(hook)
            if (agent, event) in CAPPED_TIMEOUT_S and "timeout" in mine:
                mine["timeout"] = CAPPED_TIMEOUT_S[agent, event]
            hooks[event].append({"hooks": [mine]})
            added += 1
    if isinstance(data.get("hooks"), dict) and not data["hooks"]:
        del data["hooks"]
    return data, taken, added


def merge_mcp(data: dict, server: dict | None) -> tuple[dict, str]:
    """The file's `mcpServers` with memvault's server set (or, server None, taken out). Returns (data, what
    happened: added, updated, unchanged, removed, absent, theirs)."""
    data = json.loads(json.dumps(data))
    servers = data.get("mcpServers")
    current = servers.get(MCP_NAME) if isinstance(servers, dict) else None
    ours = isinstance(current, dict) and is_ours([current.get("command"), *(current.get("args") or [])], ["mcp"])
    if current is not None and not ours:
        return data, "theirs"
    if server is None:
        if current is None:
            return data, "absent"
        del servers[MCP_NAME]
        if not servers:
            del data["mcpServers"]
        return data, "removed"
    if not isinstance(servers, dict):
        servers = data["mcpServers"] = {}
    if current == server:
        return data, "unchanged"
    servers[MCP_NAME] = server
    return data, "updated" if current is not None else "added"


def plan(agent: str, scope: str, remove: bool, command: list[str], project: Path, home: Path) -> SetupPlan:
    """What setup would write for this agent and scope (nothing is written here)."""
    if agent not in HOOK_EVENTS:
        raise UsageError(f"unknown agent {agent!r} (one of {', '.join(HOOK_EVENTS)})", params="agent")
    if scope not in ("user", "project"):
        raise UsageError(f"unknown scope {scope!r} (user or project)", params="scope")
    out = SetupPlan(agent, scope, remove)
    base = home if scope == "user" else project
    hook_line = shlex.join([*command, "hook", agent])
    if agent == "claude-code":
        settings, mcp = base / ".claude" / "settings.json", (home / ".claude.json" if scope == "user"
                                                              else project / ".mcp.json")
        hook = {"type": "command", "command": hook_line, "timeout": AGENT_TIMEOUT_S}
        server = {"type": "stdio", "command": command[0], "args": [*command[1:], "mcp"], "env": {}}
    elif agent == "codex":
        settings, mcp = base / ".codex" / "hooks.json", None
        hook = {"type": "command", "command": hook_line, "timeout": AGENT_TIMEOUT_S}
        server = None
        out.notes.append("Codex runs a new hook only once you have trusted it: open /hooks in Codex.")
        out.notes.append("MCP in Codex: " + ("`codex mcp remove memvault`" if remove else
                                             f"`codex mcp add memvault -- {shlex.join([*command, 'mcp'])}`"))
    else:
        settings, mcp = base / ".gemini" / "settings.json", base / ".gemini" / "settings.json"
        hook = {"name": "memvault", "type": "command", "command": hook_line, "timeout": AGENT_TIMEOUT_S * 1000,
                "description": "memvault: the project's memory, the exchange stored"}
        server = {"command": command[0], "args": [*command[1:], "mcp"]}
    before, data = _read_json(settings)
    data, taken, added = merge_hooks(data, agent, None if remove else hook)
    change = FileChange(settings, before, _dump(data) if (data or before is not None) else "")
    if remove:
        change.said.append(f"{taken} memvault hook(s) taken out" if taken else "no memvault hook in it")
    else:
        change.said.append(f"memvault's hook on {', '.join(HOOK_EVENTS[agent])}"
                           + (" (kept as it was)" if change.before == change.after else ""))
    files = [change]
    if mcp is not None:
        if mcp == settings:
            mcp_change, data2 = change, data
        else:
            before2, data2 = _read_json(mcp)
            mcp_change = FileChange(mcp, before2, "")
            files.append(mcp_change)
        data2, what = merge_mcp(data2, None if remove else server)
        mcp_change.after = _dump(data2) if (data2 or mcp_change.before is not None) else ""
        mcp_change.said.append({"added": "MCP server memvault added", "updated": "MCP server memvault updated",
                                "unchanged": "MCP server memvault (kept as it was)",
                                "removed": "MCP server memvault taken out", "absent": "no memvault MCP server in it",
                                "theirs": "an MCP server named memvault that is not memvault's: left as it is"}[what])
    out.files = [f for f in files if f.after or f.before is not None]
    return out


def apply(setup: SetupPlan) -> None:
    """Write each changed file (atomically, its mode kept), its old text kept beside it first."""
    for change in setup.files:
        if not change.changed:
            continue
        path = change.path
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o644
        if change.before is not None:
            mode = path.stat().st_mode & 0o777
            _write(backup_path(path), change.before, mode)
        _write(path, change.after, mode)


def _write(path: Path, text: str, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.memvault-{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
