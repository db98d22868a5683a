#!/usr/bin/env python3
"""Torture run (issue 6): parallel writers, SIGKILL at random moments, hostile input.

    python bench/torture.py              # 60 kill trials, 20 writers racing watch and search, 2 rounds
    python bench/torture.py --quick      # smoke: 8 kill trials, 6 writers, 1 round
    python bench/torture.py --seed 7 --trials 100 --writers 30 --rounds 3

Everything is real: `memvault` processes, SIGKILL of the whole process group (git children
included) through tests/kill_at.py, git, LanceDB, the bundled embedder, and the scripted
OpenAI-compatible server of tests/fake_llm.py for chat.

1. Writers: N `memvault add` at once on one vault, racing `reindex --watch`, two `search`es and
   a file written by hand. Every add must exit 0 and its memory be a file, an index row and a
   commit; the tree clean; `git fsck --strict` silent.
2. Kill trials on one long-lived vault (and on fresh vaults for creation): `add`, a 150-line
   `add --jsonl` (cold, and carried out by `memvault agent`, which is the process killed), `reindex
   --full` and chat's post-reply upkeep are SIGKILLed at a random moment of their write phase
   (a seeded delay after the write began), a few at a random moment of their whole life. After
   each: no empty or half-written memory file, no temp file read as a memory; the next `add`
   works (stale git and vault locks recovered, the killed change rolled back or forward); `reindex`
   then `reindex --check` exit 0; the index holds exactly the files; search finds every memory whose
   command exited 0; git clean. A killed `add --jsonl` left nothing or everything: the same command
   run again stores each of its texts exactly once, and no commit calls its files hand edits.
3. Hostile input: every case of the issue, each expecting one clear line on stderr naming the
   file or setting, the right exit code, no traceback and nothing written outside the vault.

Prints the figures and writes bench/out/torture.json (or --out). Exit code 1 when a memory was
lost or any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
KILL_AT = REPO / "tests" / "kill_at.py"
sys.path.insert(0, str(REPO / "tests"))  # fake_llm.py: the scripted LLM server the tests use
sys.path.insert(0, str(HERE))
from processes import stop_process  # noqa: E402


# -- plumbing ----------------------------------------------------------------------------------


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    crashed: str | None = None  # an uncaught exception (a traceback in a real process)


def cli(vault: Path, *args: str, input: str | bytes | None = None) -> Ran:
    """The CLI in this process (fast: models stay loaded), stdout and stderr apart."""
    from typer.testing import CliRunner

    from memvault.faces.cli import app

    result = CliRunner().invoke(app, ["--vault", str(vault), *args], input=input, catch_exceptions=True)
    crashed = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        crashed = f"{type(result.exception).__name__}: {result.exception}"
    return Ran(result.exit_code, result.stdout, result.stderr, crashed)


def spawn(vault: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    """A real `memvault` process, leading its own process group, through kill_at.py."""
    return subprocess.Popen([sys.executable, str(KILL_AT), "--vault", str(vault), *args],
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def kill_after(proc: subprocess.Popen, seconds: float) -> None:
    """SIGKILL to the process's group once `seconds` have passed (gone already: nothing to do)."""
    time.sleep(seconds)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(vault), *args], capture_output=True, text=True, check=True).stdout


def isolate(workdir: Path) -> None:
    """No MEMVAULT_* or git setting of the person running this leaks in; a known git identity."""
    for name in list(os.environ):
        if name.startswith("MEMVAULT_") or name.startswith("GIT_"):
            del os.environ[name]
    config = workdir / "gitconfig"
    config.write_text("[user]\n\tname = Torture\n\temail = torture@localhost\n")
    os.environ["GIT_CONFIG_GLOBAL"] = str(config)
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"


@dataclass
class Figures:
    writers_parallel: int = 0
    writer_rounds: int = 0
    kill_trials: int = 0
    kills_landed: int = 0  # trials where SIGKILL arrived before the command finished
    finished_before_kill: int = 0
    kills_by_command: dict = field(default_factory=dict)
    bulk_kills: int = 0  # add --jsonl (cold or the agent) killed mid-way
    bulk_rolled_back: int = 0  # ... whose next command took the change back (nothing kept)
    bulk_rolled_forward: int = 0  # ... whose next command finished it (everything committed)
    bulk_before_writing: int = 0  # ... killed before its first file (nothing to settle)
    bulk_texts_twice: int = 0  # texts the rerun stored a second time (must be 0)
    bulk_hand_edit_commits: int = 0  # commits that took a killed change's files as hand edits (must be 0)
    stale_git_locks_recovered: int = 0
    stale_vault_locks_recovered: int = 0
    temp_files_left_and_ignored: int = 0
    memories_written: int = 0  # commands that exited 0, plus what a killed command left whole
    memories_found: int = 0
    memories_lost: int = 0
    hostile_cases: int = 0
    hostile_passed: int = 0
    failures: list = field(default_factory=list)


class Run:
    def __init__(self, workdir: Path, seed: int, figures: Figures, verbose: bool):
        self.workdir = workdir
        self.rng = random.Random(seed)
        self.fig = figures
        self.verbose = verbose
        self.expected: dict[Path, set[str]] = {}  # vault -> texts that must be there
        self.temp_files: set[Path] = set()

    def say(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def fail(self, what: str) -> None:
        self.fig.failures.append(what)
        self.say(f"  FAIL {what}")

    def killed(self, trial: int, kind: str, victim: subprocess.Popen, proc: subprocess.Popen, err: str) -> bool:
        """A kill trial counted, by command: whether SIGKILL ended `victim` before it finished; `proc` (the
        command, or the client of the agent that was the victim) that finished on its own must exit 0."""
        landed = victim.returncode == -signal.SIGKILL
        self.fig.kill_trials += 1
        self.fig.kills_landed += landed
        self.fig.finished_before_kill += not landed
        self.fig.kills_by_command[kind] = self.fig.kills_by_command.get(kind, 0) + landed
        if not landed and proc.returncode != 0:
            self.fail(f"trial {trial} ({kind}) exited {proc.returncode}: {err.strip()[-300:]}")
        return landed

    def expect(self, vault: Path, *texts: str) -> None:
        self.expected.setdefault(vault, set()).update(texts)

    def add(self, vault: Path, text: str) -> bool:
        ran = cli(vault, "add", text)
        if ran.code != 0 or ran.crashed:
            self.fail(f"add failed in {vault.name}: {ran.crashed or ran.stderr.strip()}")
            return False
        self.expect(vault, text)
        return True

    # -- invariants ---------------------------------------------------------------------------
    def intact(self, vault: Path) -> set[Path]:
        """Every file under entries/ is a whole memory or an ignored temp file; returns the temp files."""
        from memvault.store import files
        from memvault.errors import MemoryFileError

        memories = set(files.walk_entries(vault, include_deleted=True))
        temps = set()
        for path in sorted((vault / "entries").rglob("*")) if (vault / "entries").is_dir() else []:
            if path.is_dir():
                continue
            if path in memories:
                try:
                    memory, adopted = files.read_memory(path, vault)
                except MemoryFileError as exc:
                    self.fail(f"half-written memory after a kill: {exc}")
                    continue
                if adopted or not memory.text.strip():
                    self.fail(f"memory without front matter or text after a kill: {path}")
            elif path.name.startswith(".") and path.name.endswith(".tmp") and not files.is_memory_file(path):
                temps.add(path)
            else:
                self.fail(f"stray file after a kill: {path}")
        return temps

    def converges(self, vault: Path) -> None:
        """reindex, --check, index == files, git clean and sound, search finds everything."""
        from memvault.store import files
        from memvault.store.index import Index
        from memvault.store.vault import Vault

        for args in (["reindex"], ["reindex", "--check"]):
            ran = cli(vault, *args)
            if ran.code != 0 or ran.crashed:
                self.fail(f"`memvault {' '.join(args)}` exited {ran.code} in {vault.name}: "
                          f"{ran.crashed or (ran.stdout + ran.stderr).strip()[-300:]}")
                return
        live = {}
        for path in files.walk_entries(vault):
            memory = files.read_memory(path, vault)[0]
            live[path.relative_to(vault).as_posix()] = memory
        table = Index(Vault(vault)).table()
        rows = {}
        if table is not None:
            data = table.search().select(["path", "id"]).limit(None).to_arrow().to_pydict()
            if len(data["path"]) != len(set(data["path"])):
                self.fail(f"a path has two index rows in {vault.name}")
            rows = dict(zip(data["path"], data["id"]))
        if rows != {rel: m.id for rel, m in live.items()}:
            self.fail(f"index != files in {vault.name}: {len(rows)} rows, {len(live)} files")
        texts = {m.text for m in live.values()}
        lost = self.expected.get(vault, set()) - texts
        if lost:
            self.fail(f"lost in {vault.name}: {sorted(lost)[:5]}")
        if git(vault, "status", "--porcelain"):
            self.fail(f"dirty tree in {vault.name}: {git(vault, 'status', '--porcelain')[:300]}")
        if not set(live) <= set(git(vault, "ls-files", "entries").splitlines()):
            self.fail(f"memory files not committed in {vault.name}")
        fsck = subprocess.run(["git", "-C", str(vault), "fsck", "--strict"], capture_output=True, text=True)
        if fsck.returncode or "error" in fsck.stderr.lower():
            self.fail(f"git fsck in {vault.name}: {fsck.stderr.strip()[:300]}")
        want = {m.text for m in live.values() if m.role in ("memory", "note", "decision")}
        ran = cli(vault, "search", "--json", "--no-rerank", "-a", "-k", str(len(live) + 5), "memory")
        found = {r["text"] for r in json.loads(ran.stdout)} if ran.code == 0 and not ran.crashed else set()
        if not want <= found:
            self.fail(f"search misses {len(want - found)} memories in {vault.name}")

    # -- 1. writers ---------------------------------------------------------------------------
    def writers(self, n: int, round_no: int) -> None:
        vault = self.workdir / f"writers-{round_no}"
        self.say(f"writers round {round_no}: {n} adds racing reindex --watch and 2 searches")
        self.add(vault, "memory: the vault exists before the race")
        watcher = spawn(vault, "reindex", "--watch")
        procs: list[subprocess.Popen] = []
        try:
            deadline = time.time() + 300
            while "watching" not in (line := watcher.stderr.readline()):
                if not line or time.time() > deadline:
                    self.fail("reindex --watch did not start")
                    return
            texts = [f"memory {round_no}.{i}: parallel writer {i} of round {round_no}" for i in range(n)]
            procs += [spawn(vault, "add", "-c", f"c{i % 3}", text) for i, text in enumerate(texts)]
            procs += [spawn(vault, "search", "--json", "--no-rerank", "-a", "parallel writer") for _ in range(2)]
            note = vault / "entries/global/notes/by-hand.md"
            note.parent.mkdir(parents=True, exist_ok=True)
            note.write_text(f"memory: written by hand during round {round_no}\n")
            self.expect(vault, f"memory: written by hand during round {round_no}")
            added = []
            for proc, text in zip(procs, texts + [None, None]):
                out, err = proc.communicate(timeout=1200)
                if proc.returncode != 0 or "Traceback" in err:
                    self.fail(f"{proc.args[4:6]} exited {proc.returncode}: {err.strip()[-300:]}")
                elif text is not None:
                    self.expect(vault, text)
                    added.append(out.split()[0])
            deadline = time.time() + 300
            while git(vault, "status", "--porcelain") or cli(vault, "reindex", "--check").code:
                if time.time() > deadline:
                    self.fail("the watcher did not settle")
                    break
                time.sleep(0.5)
        finally:
            for proc in procs:
                stop_process(proc)
            stop_process(watcher, timeout=120)  # SIGTERM: it stops cleanly (never SIGINT, see processes.py)
        _, err = watcher.communicate(timeout=120)
        if watcher.returncode != 0 or "Traceback" in err:
            self.fail(f"reindex --watch exited {watcher.returncode}: {err.strip()[-300:]}")
        log = git(vault, "log", "--format=%b")
        missing = [i for i in added if f"Memvault-Added: {i}" not in log]
        if missing:
            self.fail(f"{len(missing)} adds have no commit")
        self.converges(vault)
        self.fig.writers_parallel = max(self.fig.writers_parallel, n)
        self.fig.writer_rounds += 1

    # -- 2. kills -----------------------------------------------------------------------------
    def calibrate(self, vault: Path) -> dict[str, float]:
        """Seconds from the start of the write phase to the end, per command (one clean run each)."""
        self.say("calibrating the write phases")
        spans = {}
        for name, args, mark in (
            ("add", ["add", "memory: calibration"], "memvault/store/vault.py:change"),
            ("reindex --full", ["reindex", "--full"], "memvault/store/index.py:_reset"),
        ):
            proc = spawn(vault, *args, env={"PAUSE_AT": f"{mark};1;0"})
            while "pause_at" not in (proc.stderr.readline() or "pause_at"):
                pass
            began = time.monotonic()
            proc.communicate(timeout=600)
            spans[name] = max(0.5, time.monotonic() - began)
            if name == "add":
                self.expect(vault, "memory: calibration")
        spans["chat upkeep"] = 3.0  # the scripted model answers each upkeep call within 0.5 s
        self.say("  " + ", ".join(f"{k} {v:.1f} s" for k, v in spans.items()))
        return spans

    def kills(self, trials: int) -> None:
        from fake_llm import FakeLLM

        vault = self.workdir / "kills"
        for text in ("memory: the user keeps bees", "memory: the user rows on Sundays",
                     "memory: the user reads Tolstoy"):
            self.add(vault, text)
        spans = self.calibrate(vault)
        llm = FakeLLM()
        llm._server.handle_error = lambda *args: None  # a killed client resets its connection: expected here
        llm.default = {"content": json.dumps({"facts": ["The user tortures software for a living"]}), "delay": 0.3}
        llm_env = {"MEMVAULT_LLM_BASE_URL": llm.base_url, "MEMVAULT_LLM_MODEL": "openai/test-model",
                   "MEMVAULT_LLM_TIMEOUT": "30"}
        try:
            for trial in range(trials):
                kinds = ["add", "reindex --full", "chat upkeep", "add (new vault)", "add --jsonl", "agent add --jsonl"]
                kind = kinds[trial] if trial < len(kinds) else \
                    self.rng.choices(kinds, weights=[5, 2, 2, 1, 3, 3])[0]
                if kind.endswith("add --jsonl"):
                    self.bulk_trial(vault, trial, kind, spans)
                    continue
                # When in its life the kill lands: a random moment of the write phase (a seeded delay
                # after the write began), of the whole process (imports included), or a random one
                # of the risky steps (temp file written, file renamed, rows added, inside git...).
                mode = self.rng.choices(["write phase", "whole life", "risky step"], weights=[5, 2, 3])[0]
                target = vault if kind != "add (new vault)" else self.workdir / f"fresh-{trial}"
                text = f"memory {trial}: written while being killed ({kind})"
                # inside `git update-index` (1st process commit_paths starts) or `git commit` (2nd)
                in_git = (f"memvault/store/gitrepo.py:commit_paths>c:_posixsubprocess.fork_exec;{self.rng.randint(1, 6)};"
                          f"{self.rng.uniform(0, 0.015):.3f}")
                if kind.startswith("add"):
                    args, mark, span = ["add", text], "memvault/store/vault.py:change", spans["add"] + 1.0
                    steps = ["memvault/store/vault.py:change>c:posix.replace", "memvault/store/files.py:_fsync_dir",
                             "memvault/store/index.py:_apply",
                             "memvault/store/index.py:_arrow_rows", "memvault/store/state.py:write", in_git, in_git]
                    if kind == "add (new vault)":
                        steps += [f"memvault/store/gitrepo.py:init_repo;1;{self.rng.uniform(0, 0.5):.3f}"] * 2
                elif kind == "reindex --full":
                    args, mark, span = ["reindex", "--full"], "memvault/store/index.py:_reset", spans["reindex --full"]
                    steps = ["memvault/store/index.py:_reset", "memvault/store/models.py:embed", "memvault/store/index.py:_arrow_rows",
                             "memvault/store/index.py:ensure_fts", "memvault/store/state.py:write", "c:posix.replace"]
                else:
                    args, mark, span = ["chat", "--no-stream", f"Trial {trial}: I torture software for a living"], \
                        "memvault/learning/learn.py:plan", spans["chat upkeep"]
                    steps = ["memvault/learning/learn.py:apply", "memvault/learning/summaries.py:write_rolling_summary",
                             "memvault/store/vault.py:evict", "memvault/store/state.py:write", in_git]
                    llm.push(f"Reply {trial}.")
                delay = self.rng.uniform(0, span)
                env = dict(llm_env) if kind == "chat upkeep" else {}
                if mode == "whole life":
                    proc = spawn(target, *args, env=env)
                    delay = self.rng.uniform(0, span + 3.0)
                    kill_after(proc, delay)
                    where = f"+{delay:.2f}s"
                elif mode == "risky step":
                    where = self.rng.choice(steps)
                    proc = spawn(target, *args, env={**env, "KILL_AT": where})
                else:
                    where = f"{mark} +{delay:.2f}s"
                    proc = spawn(target, *args, env={**env, "KILL_AT": f"{mark};1;{delay:.3f}"})
                try:
                    out, err = proc.communicate(timeout=600)
                finally:
                    stop_process(proc)
                landed = self.killed(trial, kind, proc, proc, err)
                if "Traceback" in err:
                    self.fail(f"trial {trial} ({kind}) printed a traceback: {err.strip()[-300:]}")
                if not landed and kind.startswith("add"):
                    self.expect(target, text)
                if not landed and kind == "chat upkeep":
                    self.expect(target, f"Trial {trial}: I torture software for a living", f"Reply {trial}.")
                if self.verbose:
                    self.say(f"trial {trial:3d} {kind:<16} {mode:<11} {where:<42} -> "
                             f"{'KILLED' if landed else 'finished'}")
                self.after_kill(target, trial)
        finally:
            llm.close()

    def bulk_trial(self, vault: Path, trial: int, kind: str, spans: dict[str, float]) -> None:
        """A 150-line `add --jsonl` killed mid-way, cold or inside the agent that carries it out: the next
        command settles the change (nothing or everything), and the same command run again stores each
        text exactly once; no commit takes the killed change's files as hand edits."""
        lines = self.workdir / f"bulk-{trial}.jsonl"
        texts = [f"memory {trial}.{i}: bulk line {i} of trial {trial} ({kind})" for i in range(150)]
        lines.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
        mode = self.rng.choices(["write phase", "whole life", "risky step"], weights=[5, 2, 3])[0]
        steps = [f"memvault/store/files.py:write_memory;{self.rng.randint(1, 150)}", "memvault/store/index.py:_apply",
                 "memvault/store/state.py:write",
                 f"memvault/store/gitrepo.py:commit_paths>c:_posixsubprocess.fork_exec;{self.rng.randint(1, 6)};"
                 f"{self.rng.uniform(0, 0.015):.3f}"]
        span = spans["add"] + 2.0
        if mode == "risky step":
            where = self.rng.choice(steps)
        elif mode == "write phase":
            where = f"memvault/store/vault.py:change;1;{self.rng.uniform(0, span):.3f}"
        else:
            where = f"+{self.rng.uniform(0, span + 3.0):.2f}s"
        kill_env = {"KILL_AT": where} if mode != "whole life" else {}
        head = git(vault, "rev-parse", "HEAD").strip()
        agent = None
        try:
            if kind == "agent add --jsonl":
                agent = spawn(vault, "agent", "--idle", "5", env=kill_env)
                deadline = time.time() + 300
                while "listening on" not in (line := agent.stderr.readline()):
                    if not line or time.time() > deadline:
                        self.fail(f"trial {trial}: the agent did not start: {agent.stderr.read()[-300:]}")
                        return
                proc = subprocess.Popen([sys.executable, "-m", "memvault", "--vault", str(vault), "-q", "add", "--jsonl",
                                         str(lines)], env={**os.environ, "MEMVAULT_AGENT": "use"},
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                victim = agent
            else:
                proc = victim = spawn(vault, "-q", "add", "--jsonl", str(lines), env=kill_env)
            if mode == "whole life":
                kill_after(victim, float(where[1:-1]))
            out, err = proc.communicate(timeout=600)
        finally:
            if agent is not None:
                stop_process(agent)
            stop_process(proc)
        landed = self.killed(trial, kind, victim, proc, err)
        # The agent killed after it took the command: the client says so (exit 1); before: it ran cold
        if landed and agent is not None and not (proc.returncode == 1 and "ended while" in err or proc.returncode == 0):
            self.fail(f"trial {trial} ({kind}): the client said {proc.returncode} {err.strip()[-300:]!r}")
        if self.verbose:
            self.say(f"trial {trial:3d} {kind:<16} {mode:<11} {where:<42} -> {'KILLED' if landed else 'finished'}")
        self.temp_files |= self.intact(vault)
        self.fig.temp_files_left_and_ignored = len(self.temp_files)
        if landed:
            self.fig.bulk_kills += 1
            settled = cli(vault, "reindex")  # the next command, whatever it is, settles the change first
            if settled.code != 0 or settled.crashed:
                self.fail(f"trial {trial}: reindex after the kill exited {settled.code}: "
                          f"{settled.crashed or settled.stderr.strip()[-300:]}")
            self.fig.bulk_rolled_back += "took back the change" in settled.stderr
            self.fig.bulk_rolled_forward += "finished the change" in settled.stderr
            self.fig.bulk_before_writing += "took back" not in settled.stderr and "finished the change" not in settled.stderr
        again = cli(vault, "-q", "add", "--jsonl", str(lines))  # the user runs the same command again
        if again.code != 0 or again.crashed:
            self.fail(f"trial {trial}: the rerun of add --jsonl exited {again.code}: "
                      f"{again.crashed or again.stderr.strip()[-300:]}")
        from memvault.store import files

        stored = [files.read_memory(p, vault)[0].text for p in files.walk_entries(vault)]
        twice = sum(stored.count(t) > 1 for t in texts)
        self.fig.bulk_texts_twice += twice
        if twice or not set(texts) <= set(stored):
            self.fail(f"trial {trial} ({kind}): {twice} texts stored twice, {len(set(texts) - set(stored))} missing")
        hand = [s for s in git(vault, "log", "--format=%s", f"{head}..HEAD").splitlines() if "hand edit" in s]
        self.fig.bulk_hand_edit_commits += len(hand)
        if hand:
            self.fail(f"trial {trial} ({kind}): the killed change's files were committed as {hand[0]!r}")
        self.expect(vault, *texts)
        self.converges(vault)

    def after_kill(self, vault: Path, trial: int) -> None:
        from memvault.store import files

        self.temp_files |= self.intact(vault)
        self.fig.temp_files_left_and_ignored = len(self.temp_files)
        git_dir = vault / ".git"
        locks = [p for p in (git_dir / "index.lock", git_dir / "HEAD.lock") if p.exists()]
        locks += list((git_dir / "refs").rglob("*.lock")) if (git_dir / "refs").is_dir() else []
        if (vault / ".memvault/lock").exists():
            self.fig.stale_vault_locks_recovered += 1
        if self.add(vault, f"memory: the command after trial {trial} works"):
            self.fig.stale_git_locks_recovered += len(locks)
        # The next command settled the killed change (taken back, or finished when it had written
        # everything); what is there now is kept from now on.
        if vault.is_dir():
            self.expect(vault, *(files.read_memory(p, vault)[0].text for p in files.walk_entries(vault)))
        self.converges(vault)

    # -- 3. hostile input ---------------------------------------------------------------------
    def hostile(self) -> None:
        from fake_llm import FakeLLM, refused_url

        self.say("hostile input")
        base = self.workdir / "hostile"
        base.mkdir()
        sentinel = base / "outside"
        sentinel.mkdir()
        (sentinel / "keep.md").write_text("TOP SECRET outside the vault\n")
        n = [0]

        def fresh(with_memory: bool = True) -> Path:
            n[0] += 1
            vault = base / f"v{n[0]}"
            if with_memory:
                cli(vault, "add", "memory: the user collects stamps")
            return vault

        def case(name: str, ran: Ran, code: int, needle: str | tuple[str, ...], vault: Path | None = None,
                 lines: int | None = 1, where: str = "stderr") -> None:
            self.fig.hostile_cases += 1
            text = ran.stderr if where == "stderr" else ran.stdout
            problems = []
            if ran.crashed or "Traceback" in ran.stderr:
                problems.append(f"traceback: {ran.crashed}")
            if ran.code != code:
                problems.append(f"exit {ran.code}, wanted {code}")
            for piece in (needle,) if isinstance(needle, str) else needle:
                if piece not in text:
                    problems.append(f"{piece!r} not in {text.strip()[-300:]!r}")
            if lines is not None:
                mine = [line for line in ran.stderr.splitlines() if line.startswith("memvault: error")]
                if len(mine) != lines:
                    problems.append(f"{len(mine)} error lines, wanted {lines}: {ran.stderr.strip()[-300:]!r}")
            if sorted(p.name for p in sentinel.iterdir()) != ["keep.md"] or \
                    (sentinel / "keep.md").read_text() != "TOP SECRET outside the vault\n":
                problems.append("wrote outside the vault")
            if vault is not None and vault.is_dir() and (vault / ".git").is_dir() and \
                    git(vault, "status", "--porcelain", "--", "entries/global/facts/20*"):
                problems.append("the vault has uncommitted memories")
            if problems:
                self.fail(f"hostile {name}: {'; '.join(problems)}")
            else:
                self.fig.hostile_passed += 1
            if self.verbose:
                self.say(f"  {'ok  ' if not problems else 'FAIL'} {name}")

        def broken(name: str, content: bytes, reason: str) -> None:
            vault = fresh()
            bad = vault / "entries/global/facts" / f"{name}.md"
            bad.write_bytes(content)
            case(f"file: {name}", cli(vault, "reindex"), 1, (f"skipped {bad}: ", reason), vault)

        broken("broken-yaml", b"---\nid: [oops\nrole: memory\n---\nx\n", "front matter is not valid YAML")
        broken("not-a-mapping", b"---\n- a\n- b\n---\nx\n", "not a mapping")
        vault = fresh()  # front matter without an id is a hand-written note: adopted (given an id), not skipped
        (vault / "entries/global/facts/no-id.md").write_bytes(b"---\nrole: memory\ncreated_at: 2024-01-01T00:00:00Z\n---\nx\n")
        case("file: no-id (adopted)", cli(vault, "reindex"), 0, "adopted entries/global/facts/no-id.md as a note",
             vault, lines=0)
        broken("bad-date", b"---\nid: a\nrole: memory\ncreated_at: last tuesday\n---\nx\n", "not an ISO 8601")
        broken("unknown-role", b"---\nid: a\nrole: wizard\ncreated_at: 2024-01-01\n---\nx\n", "unknown role")
        broken("unclosed", b"---\nid: a\nrole: memory\n", "no closing")
        broken("non-utf8", "caf\xe9\n".encode("latin-1"), "not UTF-8")
        broken("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file")
        broken("zero-bytes", b"", "empty file")
        broken("ten-mb", b"y" * (10 * 1024 * 1024), "the limit is 1 MiB")

        vault = fresh()
        first = next((vault / "entries/global/facts").glob("*.md"))
        twin = first.with_name("twin.md")
        twin.write_text(first.read_text().replace("stamps", "coins"))
        case("two files, one id", cli(vault, "reindex"), 1, "is already used by", vault)

        vault = fresh()
        (vault / "entries/evil").symlink_to(sentinel, target_is_directory=True)
        (vault / "entries/global/facts/link.md").symlink_to(sentinel / "keep.md")
        case("symlinks in entries/", cli(vault, "reindex"), 1, "symbolic link (not followed)", vault, lines=2)
        case("symlinked conversation, chat --context", cli(vault, "chat", "--context", "-c", "evil"), 0,
             "0 turns", vault, lines=0, where="stdout")
        case("symlinked conversation, add", cli(vault, "add", "-c", "evil", "x"), 2, "outside the vault", vault)

        big = base / "big.txt"
        big.write_bytes(b"x" * (10 * 1024 * 1024))
        case("10 MB --file", cli(fresh(False), "add", "--file", str(big)), 2, "the limit is 1 MiB")
        case("10 MB stdin", cli(fresh(False), "add", input="x" * (10 * 1024 * 1024)), 2, "the limit is 1 MiB")
        case("empty stdin", cli(fresh(False), "add", input=""), 1, "the text is empty")
        case("whitespace stdin", cli(fresh(False), "add", input=" \n\t \n"), 1, "the text is empty")
        case("non-UTF-8 stdin", cli(fresh(False), "add", input=b"caf\xe9"), 2, "stdin is not UTF-8")
        for bad in ("../../etc", "a/../../b", "nul\x00byte", ".."):
            for command in (["add", "x"], ["search", "x"], ["chat", "x"]):
                case(f"conversation {bad!r} ({command[0]})", cli(fresh(False), command[0], "-c", bad, *command[1:]),
                     2, "conversation id")
        for odd in ("/abs", "a/b", "z" * 300, "Ça va ☕ 你好 ﷽"):
            vault = fresh(False)
            ran = cli(vault, "add", "-c", odd, "--json", "x")
            ok = ran.code == 0 and (vault / json.loads(ran.stdout)[0]["path"]).resolve().is_relative_to(
                (vault / "entries").resolve())
            case(f"conversation {odd[:20]!r} stays inside", Ran(0 if ok else 1, ran.stdout, ran.stderr, ran.crashed),
                 0, "", vault, lines=0)
        afile = base / "afile"
        afile.write_text("precious")
        for command in (["add", "x"], ["search", "x"], ["reindex"], ["log"]):
            case(f"vault path is a file ({command[0]})", cli(afile, *command), 2, "exists and is not a folder")
        self.read_only(case, fresh)

        vault = fresh()
        shutil.rmtree(vault / ".memvault")
        case("deleted .memvault", cli(vault, "search", "stamps"), 0, "no index", vault, lines=0)
        vault = fresh()
        (vault / ".memvault/state.db").write_text("{not a database")
        case("corrupt state.db", cli(vault, "search", "stamps"), 0, "rebuild", vault, lines=0)
        vault = fresh()
        for path in (vault / ".memvault/index").rglob("*"):
            if path.is_file():
                path.write_bytes(b"garbage")
        case("garbage index", cli(vault, "search", "stamps"), 0, "rebuild", vault, lines=0)
        vault = fresh()
        for path in (vault / ".memvault/index").rglob("data/*.lance"):
            path.unlink()
        case("index data files gone, reindex", cli(vault, "reindex"), 0, "rebuild", vault, lines=0)
        vault = fresh()
        with sqlite3.connect(vault / ".memvault/state.db") as db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'model'",
                       (json.dumps({"name": "some/other-model", "dim": 768, "fingerprint": "x"}),))
        case("index of another model", cli(vault, "search", "stamps"), 0, "built with some/other-model", vault,
             lines=0)

        llm = FakeLLM()
        try:
            os.environ.update({"MEMVAULT_LLM_BASE_URL": llm.base_url, "MEMVAULT_LLM_MODEL": "openai/test-model",
                               "MEMVAULT_LLM_TIMEOUT": "2"})
            llm.push("Hi.", {"raw": "<html>garbage</html>"})
            case("LLM garbage (upkeep)", cli(fresh(), "chat", "--no-stream", "My name is Tom"), 0,
                 "upkeep failed", lines=0)
            llm.push("Hi.", '{"facts": ["The user is na', '{"facts": ["The')
            case("LLM truncated JSON", cli(fresh(), "chat", "--no-stream", "My name is Tom"), 0, "Hi.", lines=0,
                 where="stdout")
            vault = fresh()
            llm.push(json.dumps({"facts": ["The user collects coins"]}),
                     json.dumps({"memory": [{"id": "99", "text": "The user collects coins", "event": "DELETE"},
                                            {"id": "42", "text": "x", "event": "UPDATE"}]}), "Summary.")
            ran = cli(vault, "add", "--extract", "I collect coins")
            kept = ran.code == 0 and "The user collects coins" in ran.stdout
            case("LLM unknown ids", Ran(0 if kept else 1, ran.stdout, ran.stderr, ran.crashed), 0, "", vault, lines=0)
            llm.push({"delay": 10})
            case("LLM timeout", cli(fresh(), "chat", "My name is Tom"), 1, "within 2s")
            llm.push({"status": 500})
            case("LLM HTTP 500", cli(fresh(), "chat", "--no-stream", "My name is Tom"), 1, "500")
            os.environ["MEMVAULT_LLM_BASE_URL"] = refused_url()
            case("LLM connection refused", cli(fresh(), "chat", "My name is Tom"), 1, "MEMVAULT_LLM_BASE_URL")
        finally:
            for name in ("MEMVAULT_LLM_BASE_URL", "MEMVAULT_LLM_MODEL", "MEMVAULT_LLM_TIMEOUT"):
                os.environ.pop(name, None)
            llm.close()

    def read_only(self, case, fresh) -> None:
        """A real read-only mount (unshare as root; permission bits otherwise)."""
        vault = fresh()
        exe = [sys.executable, "-m", "memvault", "--vault", str(vault)]
        if os.geteuid() == 0:
            if not shutil.which("unshare") or subprocess.run(["unshare", "-rm", "true"]).returncode:
                self.say("  (read-only vault skipped: no unshare)")
                return
            script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
            wrap = ["unshare", "-rm", "sh", "-c", script, "sh", str(vault)]
        else:
            wrap = []
            for path in [vault, *vault.rglob("*")]:
                path.chmod(path.stat().st_mode & ~0o222)
        try:
            for args, code, needle in ((["add", "x"], 1, "not writable"), (["search", "stamps"], 0, "read-only")):
                done = subprocess.run([*wrap, *exe, *args], capture_output=True, text=True, timeout=600)
                lines = 1 if code else 0
                case(f"read-only vault ({args[0]})", Ran(done.returncode, done.stdout, done.stderr), code, needle,
                     lines=lines)
        finally:
            for path in [vault, *vault.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)

    def count(self) -> None:
        from memvault.store import files

        written = found = 0
        for vault, texts in self.expected.items():
            present = {files.read_memory(p, vault)[0].text for p in files.walk_entries(vault)} if vault.is_dir() \
                else set()
            written += len(texts)
            found += len(texts & present)
        self.fig.memories_written, self.fig.memories_found = written, found
        self.fig.memories_lost = written - found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke mode: 8 kill trials, 6 writers, 1 round")
    ap.add_argument("--trials", type=int, default=None, help="kill trials (default 60; quick 8)")
    ap.add_argument("--writers", type=int, default=None, help="parallel adds per round (default 20; quick 6)")
    ap.add_argument("--rounds", type=int, default=None, help="writer rounds (default 2; quick 1)")
    ap.add_argument("--seed", type=int, default=6, help="random seed (default 6)")
    ap.add_argument("--skip", default="", help="comma-separated phases to skip: writers,kills,hostile")
    ap.add_argument("--workdir", type=Path, default=None, help="where the vaults go (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the vaults afterwards")
    ap.add_argument("--out", type=Path, default=None, help="JSON report (default bench/out/torture[-quick].json)")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per trial and hostile case")
    args = ap.parse_args()
    trials = args.trials if args.trials is not None else (8 if args.quick else 60)
    writers = args.writers if args.writers is not None else (6 if args.quick else 20)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 2)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memvault-torture-"))
    workdir.mkdir(parents=True, exist_ok=True)
    isolate(workdir)
    figures = Figures()
    run = Run(workdir, args.seed, figures, args.verbose)
    started = time.monotonic()
    try:
        if "writers" not in skip:
            for round_no in range(1, rounds + 1):
                run.writers(writers, round_no)
        if "kills" not in skip:
            run.say(f"kill trials: {trials}")
            run.kills(trials)
        if "hostile" not in skip:
            run.hostile()
        run.count()
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started
    report = {
        "meta": {"seed": args.seed, "quick": args.quick, "seconds": round(seconds, 1), "python": sys.version.split()[0],
                 "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                 "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                          capture_output=True, text=True).stdout.strip()},
        "figures": figures.__dict__,
    }
    out = args.out or HERE / "out" / f"torture{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    f = figures
    rows = [
        ("writers in parallel (racing watch + search)", f"{f.writers_parallel} x {f.writer_rounds} round(s)"),
        ("kill trials", f"{f.kill_trials}"),
        ("kills landed (SIGKILL before the end)", f"{f.kills_landed}  "
         + ", ".join(f"{k}: {v}" for k, v in sorted(f.kills_by_command.items()))),
        ("commands that finished before the kill", f"{f.finished_before_kill}"),
        ("stale git locks recovered", f"{f.stale_git_locks_recovered}"),
        ("stale .memvault/lock recovered", f"{f.stale_vault_locks_recovered}"),
        ("temp files left by kills (never read)", f"{f.temp_files_left_and_ignored}"),
        ("add --jsonl killed (cold or the agent)", f"{f.bulk_kills}: {f.bulk_rolled_back} taken back, "
                                                   f"{f.bulk_rolled_forward} finished by the next command, "
                                                   f"{f.bulk_before_writing} before its first file"),
        ("  texts stored twice by the rerun", f"{f.bulk_texts_twice}"),
        ("  killed files committed as hand edits", f"{f.bulk_hand_edit_commits}"),
        ("memories written", f"{f.memories_written}"),
        ("memories found", f"{f.memories_found}"),
        ("memories lost", f"{f.memories_lost}"),
        ("hostile cases passed / tried", f"{f.hostile_passed} / {f.hostile_cases}"),
        ("failed checks", f"{len(f.failures)}"),
        ("time", f"{seconds:.0f} s"),
    ]
    width = max(len(label) for label, _ in rows)
    print(f"memvault torture (seed {args.seed}{', quick' if args.quick else ''})")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")
    for failure in f.failures:
        print(f"  FAIL {failure}")
    print(f"report: {out}")
    return 1 if f.memories_lost or f.failures else 0


if __name__ == "__main__":
    sys.exit(main())
