"""Coding agents' hooks (issue 42): `memvault hook claude-code|codex|gemini` and `memvault setup`.

The events and transcripts of Claude Code are recorded from the real `claude` 2.1.197 (`claude -p`
against tests/fake_anthropic.py, hooks writing their stdin to files): tests/agent_transcripts/. Codex's
and Gemini CLI's are written here after their published formats (Codex's hook schemas and rollout lines,
Gemini CLI's hook reference and session records): no Codex or Gemini CLI runs here. The real `claude`
drives the hooks end to end in tests/test_hooks_claude.py (slow).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memvault
from conftest import REPO, run_cli, run_memvault, seed, start_memvault, stop_process, wait_for_line
from memvault.faces import hooks
from memvault.learning import agent_sessions
from fake_llm import refused_url
from secret_samples import samples

RECORDED = REPO / "tests" / "agent_transcripts"
EVENTS = [json.loads(line) for line in (RECORDED / "claude-code-events.jsonl").read_text().splitlines()]
START, PROMPT, STOP, END = EVENTS[0], EVENTS[1], EVENTS[2], EVENTS[3]
PRECOMPACT = EVENTS[5]


@pytest.fixture
def project(tmp_path) -> Path:
    """A project folder (a git work tree: a .git folder is all project_root looks for) under HOME."""
    folder = Path(os.environ["HOME"]) / "src" / "shop"
    (folder / ".git").mkdir(parents=True)
    (folder / "api").mkdir()
    return folder


def recorded_event(event: dict, project: Path, transcript: Path | None = None, **changes) -> dict:
    """A recorded event as if the agent ran in `project`, its transcript at `transcript`."""
    out = {**event, "cwd": str(project), **changes}
    if transcript is not None:
        out["transcript_path"] = str(transcript)
    return out


def transcript_copy(tmp_path: Path, name: str, project: Path) -> Path:
    """A recorded transcript, its paths pointing into `project`."""
    path = tmp_path / name
    path.write_text((RECORDED / name).read_text().replace("/home/dev/proj", str(project)))
    return path


def run_hook(vault, agent: str, event: dict) -> tuple[str, list[str]]:
    """The face's answer to one event (in this process), and the upkeeps it asked for."""
    spawned: list[str] = []
    context = hooks.handle(vault, hooks.parse(agent, json.dumps(event).encode()), lambda: spawned.append("upkeep"))
    return hooks.render(agent, event["hook_event_name"], context), spawned


# -- reading transcripts ------------------------------------------------------------------------

def test_claude_code_transcript_gives_the_prompt_the_final_text_and_the_tools_in_a_line_each():
    exchanges = agent_sessions.read_transcript("claude-code", RECORDED / "claude-code-tools-compact.jsonl",
                                               "/home/dev/proj")
    # The /compact command, its output and the compaction summary that follow are not prompts.
    assert len(exchanges) == 1
    exchange = exchanges[0]
    assert exchange.prompt == "What does notes.txt say about the deploy target?"
    assert exchange.reply == "The notes file says the deploy target is staging-eu. I will remember that."
    assert exchange.tools == ["Read notes.txt"]  # the call, not the file's content
    assert exchange.turn == STOP["prompt_id"] == "8ca7e01e-0324-43f8-8b31-4c4c6902a24b"
    assert exchange.asked_at < exchange.answered_at


def codex_rollout(path: Path) -> Path:
    """A Codex rollout file of one turn (its published line types), its last line still being written."""
    path.write_text("\n".join(json.dumps(line) for line in [
        {"timestamp": "2026-11-28T10:00:00Z", "type": "session_meta", "payload": {"id": "t1", "cwd": "/repo"}},
        {"timestamp": "2026-11-28T10:00:01Z", "type": "event_msg", "payload": {"type": "task_started", "turn_id": "turn-1"}},
        {"timestamp": "2026-11-28T10:00:01Z", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions"}]}},
        {"timestamp": "2026-11-28T10:00:02Z", "type": "event_msg", "payload": {"type": "user_message",
                                                                               "message": "Why does CI fail?"}},
        {"timestamp": "2026-11-28T10:00:03Z", "type": "response_item", "payload": {
            "type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["pytest", "-x"]})}},
        {"timestamp": "2026-11-28T10:00:09Z", "type": "event_msg", "payload": {
            "type": "agent_message", "message": "The lock file is stale; run uv lock."}},
    ]) + "\n" + '{"timestamp": "2026-11-28T10:00:10Z", "type": "event_m')  # a line still being written
    return path


def test_codex_rollout_and_gemini_session_are_read(tmp_path):
    rollout = codex_rollout(tmp_path / "rollout.jsonl")
    codex = agent_sessions.read_transcript("codex", rollout, "/repo")
    assert [(e.prompt, e.reply, e.tools, e.turn) for e in codex] == [
        ("Why does CI fail?", "The lock file is stale; run uv lock.", ["shell pytest -x"], "turn-1")]
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"sessionId": "g1", "messages": [
        {"id": "1", "type": "user", "timestamp": "2026-11-28T10:00:00Z", "content": [{"text": "Rename the flag"}]},
        {"id": "2", "type": "gemini", "timestamp": "2026-11-28T10:00:05Z", "content": "",
         "toolCalls": [{"name": "replace", "args": {"file_path": "/repo/cli.py"}, "status": "success"}]},
        {"id": "3", "type": "gemini", "timestamp": "2026-11-28T10:00:06Z", "content": "Renamed --x to --y."}]}))
    gemini = agent_sessions.read_transcript("gemini", session, "/repo")
    assert [(e.prompt, e.reply, e.tools) for e in gemini] == [("Rename the flag", "Renamed --x to --y.",
                                                               ["replace cli.py"])]


def test_the_project_is_the_git_root_written_from_home_and_the_setting_names_others(project):
    vault = memvault.open_vault()
    assert vault.project_conversation(project / "api") == "~/src/shop"
    outside = Path(os.environ["HOME"]).parent / "elsewhere"
    outside.mkdir()
    assert vault.project_conversation(outside) == outside.as_posix()
    mapped = memvault.open_vault(project_conversations={"~/src": "all-src", str(project / "api"): "shop-api"})
    assert mapped.project_conversation(project / "api") == "shop-api"  # the deepest folder named wins
    assert mapped.project_conversation(project) == "all-src"
    with pytest.raises(memvault.MemvaultError, match="project_conversations"):
        memvault.open_vault(project_conversations={"~/src": "../x"}).project_conversation(project)


# -- the events ---------------------------------------------------------------------------------

def test_stop_stores_the_exchange_as_two_committed_turns_once(vault_dir, project, tmp_path):
    transcript = transcript_copy(tmp_path, "claude-code-tools-compact.jsonl", project)
    vault = memvault.open_vault()
    answer, spawned = run_hook(vault, "claude-code", recorded_event(STOP, project, transcript))
    assert answer == "" and spawned == ["upkeep"]  # Claude Code reads nothing from a Stop hook
    turns = {m.role: m for m in vault.recent("~/src/shop", kinds=["turn"])}
    assert turns["user"].text == "What does notes.txt say about the deploy target?"
    assert turns["assistant"].text == STOP["last_assistant_message"]
    assert turns["assistant"].extra["tools_used"] == ["Read notes.txt"]
    assert turns["user"].extra["extracted"] is False  # learning owed, queued for the upkeep
    assert {t.extra["agent_session"] for t in turns.values()} == {STOP["session_id"]}
    history = vault.log()
    assert history[0].to_json()["changes_total"] == 2 and "claude-code exchange" in history[0].to_json()["subject"]
    assert vault.upkeep_waiting()
    # The same Stop again (a retried hook), then the session's end: nothing stored twice.
    run_hook(vault, "claude-code", recorded_event(STOP, project, transcript))
    _, spawned = run_hook(vault, "claude-code", recorded_event(END, project, transcript))
    assert spawned == ["upkeep"]  # the session's end closes its episode in the upkeep
    assert len(vault.recent("~/src/shop", kinds=["turn"])) == 2 and len(vault.log()) == len(history)


def test_session_end_stores_what_no_stop_stored(vault_dir, project, tmp_path):
    """An interrupted turn has no Stop: the session's end takes every exchange of the transcript."""
    transcript = transcript_copy(tmp_path, "claude-code-tools-compact.jsonl", project)
    vault = memvault.open_vault()
    # A Stop whose prompt the transcript does not hold yet stores nothing (not its reply under an earlier prompt).
    run_hook(vault, "claude-code", recorded_event(STOP, project, transcript, prompt_id="not-written-yet",
                                                  last_assistant_message="An answer to a later prompt."))
    assert vault.recent("~/src/shop", kinds=["turn"]) == []
    run_hook(vault, "claude-code", recorded_event(PRECOMPACT, project, transcript))
    assert [t.role for t in vault.recent("~/src/shop", kinds=["turn"])] == ["assistant", "user"]


def test_codex_session_end_stores_the_rollouts_exchange_and_closes_the_episode(vault_dir, project, tmp_path):
    """Codex dispatches SessionEnd from 0.146 (its schema: session_id, cwd, transcript_path, reason)."""
    rollout = codex_rollout(tmp_path / "rollout.jsonl")
    vault = memvault.open_vault()
    end = {"hook_event_name": "SessionEnd", "session_id": "t1", "cwd": str(project / "api"),
           "transcript_path": str(rollout), "reason": "other"}
    answer, spawned = run_hook(vault, "codex", end)
    assert answer == "" and spawned == ["upkeep"]
    turns = {t.role: t for t in vault.recent("~/src/shop", kinds=["turn"])}
    assert turns["user"].text == "Why does CI fail?" and turns["assistant"].extra["agent"] == "codex"
    assert agent_sessions.UpkeepRequest("~/src/shop", "session-end") in list(agent_sessions._take_requests(vault.vault))


def test_a_prompt_gets_the_memories_of_other_sessions_and_nothing_when_nothing_fits(vault_dir, project, tmp_path):
    transcript = transcript_copy(tmp_path, "claude-code-tools-compact.jsonl", project)
    vault = memvault.open_vault()
    run_hook(vault, "claude-code", recorded_event(STOP, project, transcript))
    seed("I prefer pnpm over npm", vault_dir=vault_dir)  # a global fact: every project sees it
    asked = recorded_event(PROMPT, project, transcript, session_id="a-later-session",
                           prompt="Which deploy target do we use, and which package manager do I like?")
    answer, _ = run_hook(vault, "claude-code", asked)
    context = json.loads(answer)["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert "staging-eu" in context["additionalContext"] and "pnpm" in context["additionalContext"]
    assert context["additionalContext"].startswith("<memory>")
    # The session that said it has those turns in its own context already: not injected again.
    same_session = run_hook(vault, "claude-code", {**asked, "session_id": STOP["session_id"]})[0]
    assert "staging-eu is" not in same_session and "What does notes.txt" not in same_session
    # Abstention: a prompt nothing in the vault matches gets nothing at all.
    assert run_hook(vault, "claude-code", {**asked, "prompt": "how do I bake a sourdough loaf"})[0] == ""
    assert run_hook(vault, "gemini", {**asked, "hook_event_name": "BeforeAgent",
                                      "prompt": "how do I bake a sourdough loaf"})[0] == "{}"


def test_a_session_start_gets_the_project_within_the_budget(vault_dir, project):
    vault = memvault.open_vault()
    event = recorded_event(START, project)
    assert run_hook(vault, "claude-code", event)[0] == ""  # an empty vault says nothing
    seed("Orders are kept in Postgres, not Mongo", conversation="~/src/shop", kind="decision",
         rationale="we need transactions")
    seed("The staging deploy needs VPN access", conversation="~/src/shop", kind="note")
    seed("Write commit messages in the imperative", kind="decision")  # global: every project
    seed("Unrelated project decision", conversation="~/src/blog", kind="decision")
    context = json.loads(run_hook(vault, "claude-code", event)[0])["hookSpecificOutput"]["additionalContext"]
    assert "Orders are kept in Postgres, not Mongo (why: we need transactions)" in context
    assert "The staging deploy needs VPN access" in context and "imperative" in context
    assert "Unrelated project" not in context and "Project: ~/src/shop" in context
    small = vault.agent_context("~/src/shop", max_tokens=110)
    assert small.left_out > 0 and small.decisions and 0 < len(small.text) <= 110 * 4
    codex = json.loads(run_hook(vault, "codex", {**event, "model": "gpt-5", "permission_mode": "default"})[0])
    assert codex["hookSpecificOutput"]["additionalContext"] == context


def test_secrets_in_an_exchange_are_withheld(vault_dir, project, tmp_path):
    sample = next(s for s in samples() if s.kind == "openai-key")
    transcript = transcript_copy(tmp_path, "claude-code-session1.jsonl", project)
    transcript.write_text(transcript.read_text().replace("My favourite city is Lisbon.",
                                                         f"My favourite city is Lisbon. {sample.text}"))
    vault = memvault.open_vault()
    run_hook(vault, "claude-code", recorded_event(STOP, project, transcript, prompt_id="e157d890-1fb7-40d7-a836-3be84ad7690b",
                                                  last_assistant_message="Noted."))
    user = next(t for t in vault.recent("~/src/shop", kinds=["turn"]) if t.role == "user")
    assert sample.value not in user.path.read_text() and "[secret: openai-key" in user.text
    answer = run_hook(vault, "claude-code", recorded_event(PROMPT, project, session_id="other",
                                                           prompt="what is my favourite city?"))[0]
    assert "Lisbon" in answer and sample.value not in answer


# -- never in the agent's way (the installed command, as the agent runs it) ---------------------

def test_bad_input_and_a_time_limit_exit_0_with_nothing_said_and_one_log_line(vault_dir, project):
    seed("The deploy target is staging-eu", conversation="~/src/shop")
    log = vault_dir / ".memvault" / "hook.log"
    patient = {"MEMVAULT_AGENT": "off", "MEMVAULT_HOOK_TIMEOUT": "120"}  # a loaded machine: the limit is tested below
    broken = run_memvault("hook", "claude-code", input=b"{not json", env=patient)
    assert (broken.returncode, broken.stdout) == (0, b"")
    assert "not JSON" in log.read_text() and len(log.read_text().splitlines()) == 1
    gemini = run_memvault("hook", "gemini", input=b"[]", env=patient)
    assert (gemini.returncode, gemini.stdout) == (0, b"{}")  # Gemini CLI parses stdout as JSON
    prompt = json.dumps(recorded_event(PROMPT, project, prompt="what is the deploy target?")).encode()
    late = run_memvault("hook", "claude-code", input=prompt, env={"MEMVAULT_AGENT": "off", "MEMVAULT_HOOK_TIMEOUT": "0.1"})
    assert (late.returncode, late.stdout) == (0, b"")
    assert "time limit" in log.read_text().splitlines()[-1]
    (vault_dir / "memvault.toml").write_text("default_top_k = 'many'\n")
    unreadable = run_memvault("hook", "claude-code", input=prompt, env=patient)
    assert (unreadable.returncode, unreadable.stdout) == (0, b"")
    assert "memvault.toml" in log.read_text().splitlines()[-1]


@pytest.mark.slow  # end to end: cold hook processes, their modules listed (~10 s here)
def test_a_cold_prompt_is_answered_without_loading_the_cli(vault_dir, project):
    """Without an agent, `memvault hook AGENT` runs the face itself, not the CLI's typer app (typer builds
    pydantic adapters for every option: ~0.2 s of a cold hook's time limit), with the answer the CLI's `hook`
    command gives the same event."""
    seed("The deploy target is staging-eu", conversation="~/src/shop")
    prompt = json.dumps(recorded_event(PROMPT, project, prompt="what is the deploy target?")).encode()
    probe = ("import sys, runpy\nsys.argv = ['memvault'] + sys.argv[1:]\n"
             "import atexit, os\n_exit = os._exit\n"
             "def leave(code):\n    sys.stderr.write('TYPER %s' % ('typer' in sys.modules)); sys.stderr.flush(); _exit(code)\n"
             "os._exit = leave\nrunpy.run_module('memvault', run_name='__main__')\n")
    env = {**os.environ, "MEMVAULT_AGENT": "off", "MEMVAULT_HOOK_TIMEOUT": "120"}
    face = subprocess.run([sys.executable, "-c", probe, "hook", "claude-code"], input=prompt, capture_output=True,
                          env=env, timeout=300)
    assert face.returncode == 0 and b"TYPER False" in face.stderr, face.stderr
    through_cli = subprocess.run([sys.executable, "-c", probe, "--vault", str(vault_dir), "-q", "hook", "claude-code"],
                                 input=prompt, capture_output=True, env=env, timeout=300)
    assert through_cli.returncode == 0 and b"TYPER False" in through_cli.stderr  # global options: still plain
    assert face.stdout == through_cli.stdout
    assert "staging-eu" in json.loads(face.stdout)["hookSpecificOutput"]["additionalContext"]
    run_cli = subprocess.run([sys.executable, "-c", "import sys; from memvault.faces.cli import app; "
                              "sys.argv = ['memvault', 'hook', 'claude-code']; app(prog_name='memvault')"],
                             input=prompt, capture_output=True, env=env, timeout=300)
    assert run_cli.stdout == face.stdout  # the CLI's own `hook` command: the same answer


@pytest.mark.slow  # end to end: the warm agent started, hooks run through it, its upkeep waited for (~18 s here)
def test_through_the_vaults_agent_a_prompt_is_answered_and_a_stop_stored(vault_dir, project, tmp_path, monkeypatch):
    """The warm path: the event handed to the running agent (a memfd for stdin, pipes for stdout and
    stderr), the answer printed by the hook process itself."""
    monkeypatch.setenv("MEMVAULT_LLM_BASE_URL", refused_url())  # the upkeep the Stop starts ends at once
    seed("The deploy target is staging-eu", conversation="~/src/shop")
    transcript = transcript_copy(tmp_path, "claude-code-session1.jsonl", project)
    proc = start_memvault("agent", "--idle", "5")
    try:
        wait_for_line(proc, "listening on")
        warm = {"MEMVAULT_AGENT": "use", "MEMVAULT_HOOK_TIMEOUT": "30"}
        before = memvault.faces.agent_socket.ask(vault_dir / ".memvault", "status")["requests"]
        prompt = recorded_event(PROMPT, project, prompt="what is the deploy target?")
        done = run_memvault("hook", "claude-code", input=json.dumps(prompt).encode(), env=warm)
        assert done.returncode == 0 and done.stderr == b""
        assert "staging-eu" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
        stop = recorded_event(STOP, project, transcript, prompt_id="e157d890-1fb7-40d7-a836-3be84ad7690b",
                              last_assistant_message="Lisbon it is.")
        started = time.monotonic()
        assert run_memvault("hook", "claude-code", input=json.dumps(stop).encode(), env=warm).stdout == b""
        answered = time.monotonic() - started  # a write is answered at once, done in the background

        def stored():
            return {t.text for t in memvault.open_vault().recent("~/src/shop", kinds=["turn"])}

        deadline = time.monotonic() + 120
        while stored() != {"My favourite city is Lisbon.", "Lisbon it is."} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stored() == {"My favourite city is Lisbon.", "Lisbon it is."}
        # ... by the agent (a background child of the hook handed it over), not by a cold process
        assert memvault.faces.agent_socket.ask(vault_dir / ".memvault", "status")["requests"] == before + 2
        assert answered < 30
    finally:
        stop_process(proc)
        _stop_upkeep(vault_dir)


def _stop_upkeep(vault: Path, quiet_for: float = 2.0, timeout: float = 180) -> None:
    """What the hooks left running (an event done in the background, the upkeep it started) ends before
    the test does: wait until no upkeep is asked for nor holds its lock for `quiet_for` seconds."""
    import time

    sidecar = vault / ".memvault"
    deadline, quiet_since = time.monotonic() + timeout, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_for:
        busy = (sidecar / agent_sessions.UPKEEP_DIR).is_dir() and any((sidecar / agent_sessions.UPKEEP_DIR).glob("*.json"))
        if (sidecar / agent_sessions.UPKEEP_LOCK).exists():
            fd = os.open(sidecar / agent_sessions.UPKEEP_LOCK, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                busy = True
            finally:
                os.close(fd)
        busy = busy or _upkeep_running(vault)
        if busy:
            quiet_since = time.monotonic()
        time.sleep(0.1)


def _upkeep_running(vault: Path) -> bool:
    """Whether a `memvault --vault VAULT hook-upkeep` process runs (it starts before it takes its lock)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                words = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"hook-upkeep" in words and os.fsencode(str(vault)) in words:
                return True
    return False


# -- the upkeep ---------------------------------------------------------------------------------

def test_the_upkeep_learns_and_closes_the_session_as_an_episode(vault_dir, project, tmp_path, llm_env):
    llm_env.default = '{"facts": []}'
    transcript = transcript_copy(tmp_path, "claude-code-tools-compact.jsonl", project)
    vault = memvault.open_vault()
    run_hook(vault, "claude-code", recorded_event(END, project, transcript))
    outcomes = []
    assert vault.hook_upkeep(on_done=lambda conversation, outcome: outcomes.append((conversation, outcome))) == 1
    (conversation, (caught, closed)), = outcomes
    assert conversation == "~/src/shop" and caught.error is None and caught.done == 1
    episode = vault.episodes("~/src/shop").episodes[-1]
    assert episode.extra["boundary"] == "session-end" and len(episode.extra["turn_ids"]) == 2
    user = next(t for t in vault.recent("~/src/shop", kinds=["turn"]) if t.role == "user")
    # taught nothing: marked learned in the index's record, not by a commit of its own (issue 41)
    from memvault.learning.learn import learned_quietly

    assert user.extra["extracted"] is True or learned_quietly(vault.vault, [user]) == {user.id}
    assert not vault.upkeep_waiting() and vault.hook_upkeep() == 0


def test_one_upkeep_runner_per_vault_and_no_request_left_behind(vault_dir):
    vault = memvault.open_vault()
    seed("anything")
    vault.end_session("global")
    fd = os.open(vault_dir / ".memvault" / agent_sessions.UPKEEP_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another runner is at work
        assert agent_sessions.run_upkeep(vault.vault, lambda request: None) == 0
        assert vault.upkeep_waiting()  # left for the runner that holds the lock
    finally:
        os.close(fd)
    done = []
    assert agent_sessions.run_upkeep(vault.vault, done.append) == 1
    assert done[0].conversation == "global" and done[0].close == "session-end" and not vault.upkeep_waiting()


# -- setup ----------------------------------------------------------------------------------------

USER_SETTINGS = {"theme": "dark", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
                                            "PreToolUse": [{"matcher": "Bash", "hooks": [
                                                {"type": "command", "command": "./guard.sh"}]}]}}


def test_setup_claude_code_merges_keeps_a_backup_is_idempotent_and_removes_only_its_own(tmp_path):
    home = Path(os.environ["HOME"])
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps(USER_SETTINGS)
    settings.write_text(original)
    dry = run_cli("setup", "claude-code", "--dry-run")
    assert dry.exit_code == 0 and "+            \"command\": " in dry.stdout and "/dev/null" in dry.stdout
    assert settings.read_text() == original and not (home / ".claude.json").exists()
    assert run_cli("setup", "claude-code").exit_code == 0
    merged = json.loads(settings.read_text())
    assert merged["theme"] == "dark" and merged["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    assert merged["hooks"]["Stop"][0] == USER_SETTINGS["hooks"]["Stop"][0]
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"):
        command = merged["hooks"][event][-1]["hooks"][0]["command"]
        assert command.endswith(" hook claude-code") and "memvault" in command
    server = json.loads((home / ".claude.json").read_text())["mcpServers"]["memvault"]
    assert server["args"][-1] == "mcp"
    assert (home / ".claude" / "settings.json.memvault.bak").read_text() == original
    written = settings.read_text()
    again = run_cli("setup", "claude-code")
    assert again.exit_code == 0 and settings.read_text() == written and "unchanged" in again.stderr
    assert run_cli("setup", "claude-code", "--remove").exit_code == 0
    assert json.loads(settings.read_text()) == USER_SETTINGS
    assert "mcpServers" not in json.loads((home / ".claude.json").read_text())


def test_setup_leaves_a_broken_file_and_an_mcp_server_of_the_users_own(tmp_path):
    home = Path(os.environ["HOME"])
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text("{ not json")
    broken = run_cli("setup", "claude-code")
    assert broken.exit_code != 0 and "settings.json is not valid JSON" in broken.stderr
    assert (home / ".claude" / "settings.json").read_text() == "{ not json"
    (home / ".claude" / "settings.json").unlink()
    theirs = {"mcpServers": {"memvault": {"command": "my-own-memvault-proxy", "args": ["--serve"]}}}
    (home / ".claude.json").write_text(json.dumps(theirs))
    done = run_cli("setup", "claude-code")
    assert done.exit_code == 0 and "not memvault's: left as it is" in done.stderr
    assert json.loads((home / ".claude.json").read_text()) == theirs


def test_setup_project_scope_codex_and_gemini(tmp_path, project, monkeypatch):
    monkeypatch.chdir(project / "api")
    assert run_cli("setup", "claude-code", "--scope", "project").exit_code == 0
    assert "UserPromptSubmit" in json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    assert "memvault" in json.loads((project / ".mcp.json").read_text())["mcpServers"]
    codex = run_cli("setup", "codex")
    home = Path(os.environ["HOME"])
    hooks_json = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]
    assert sorted(hooks_json) == ["PreCompact", "SessionEnd", "SessionStart", "Stop", "UserPromptSubmit"]
    assert hooks_json["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex's cap for SessionEnd (it warns above)
    assert "codex mcp add memvault --" in codex.stderr and "/hooks" in codex.stderr
    assert run_cli("setup", "gemini").exit_code == 0
    gemini = json.loads((home / ".gemini" / "settings.json").read_text())
    assert sorted(gemini["hooks"]) == ["AfterAgent", "BeforeAgent", "PreCompress", "SessionEnd", "SessionStart"]
    assert gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"] == 10000  # milliseconds, Gemini's unit
    assert gemini["mcpServers"]["memvault"]["args"][-1] == "mcp"
    assert run_cli("setup", "gemini", "--remove").exit_code == 0
    assert json.loads((home / ".gemini" / "settings.json").read_text()) == {}
