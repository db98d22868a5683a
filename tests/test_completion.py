"""Completion of conversation names and memory ids: the typer callbacks and the generated scripts.

The vaults here are built by hand (files named like memvault names them), so no model loads.
The bash scripts are exercised in a real bash; zsh (through zpty) and fish when installed.
"""

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import typer.main
from typer._click.shell_completion import ShellComplete

from conftest import REPO
from memvault.faces import completion
from memvault.store import files
from memvault.faces.cli import app

BASH = REPO / "completions" / "memvault.bash"
ZSH_DIR = REPO / "completions"
FISH = REPO / "completions" / "memvault.fish"
ZSH_CAPTURE = Path(__file__).parent / "zsh_capture.zsh"


def make_vault(root: Path) -> dict:
    """global + work (plain names) + 'a/b' (hashed slug), live and deleted files."""
    ids = {}
    for conversation, role, deleted in [("global", "memory", False), ("global", "note", False),
                                        ("work", "memory", False), ("work", "user", False),
                                        ("a/b", "decision", False), ("global", "memory", True)]:
        memory = files.new_memory(f"{conversation} {role}", role, conversation)
        path = root / files.relative_path_for(memory)
        if deleted:
            path = files.deleted_path_for(root, path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files.render(memory))
        ids.setdefault("deleted" if deleted else "live", []).append(memory.id)
    summary = root / "entries" / "global" / "summaries" / "summary.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text("---\nid: x\nrole: summary\n---\nsummary\n")
    return ids


@pytest.fixture
def hand_vault(tmp_path, monkeypatch):
    root = tmp_path / "hand vault"
    ids = make_vault(root)
    monkeypatch.setenv("MEMVAULT_DIR", str(root))
    return root, ids


class _Probe(ShellComplete):
    """typer's completion machinery without a shell: which values would TAB offer?"""

    def source_vars(self):
        return {}

    def get_completion_args(self):
        return [], ""

    def format_completion(self, item):
        return item.value


def complete(args: list[str], incomplete: str) -> list[str]:
    probe = _Probe(typer.main.get_command(app), {}, "memvault", "_MEMVAULT_COMPLETE")
    return [item.value for item in probe.get_completions(args, incomplete)]


# -- the python side ----------------------------------------------------------------------------

def test_library_listing(hand_vault):
    root, ids = hand_vault
    assert completion.conversation_names(root) == ["a/b", "global", "work"]
    assert sorted(completion.memory_ids(root)) == sorted(ids["live"])
    assert sorted(completion.memory_ids(root, include_deleted=True)) == sorted(ids["live"] + ids["deleted"])
    assert completion.conversation_names(root / "missing") == []
    assert completion.memory_ids(root / "missing") == []


def test_typer_callbacks_complete_conversations_and_ids(hand_vault):
    root, ids = hand_vault
    assert complete(["add", "-c"], "") == ["a/b", "global", "work"]
    assert complete(["search", "--conversation"], "wo") == ["work"]
    assert sorted(complete(["show"], "")) == sorted(ids["live"] + ids["deleted"])
    assert sorted(complete(["log"], "")) == sorted(ids["live"] + ids["deleted"])
    assert sorted(complete(["edit"], "")) == sorted(ids["live"])
    assert sorted(complete(["rm"], "")) == sorted(ids["live"])
    one = ids["live"][0]
    assert complete(["rm"], one[:6]) == [one]


def test_callbacks_follow_vault_option(hand_vault, tmp_path):
    root, ids = hand_vault
    other = tmp_path / "other"
    other_ids = make_vault(other)
    assert sorted(complete(["--vault", str(other), "edit"], "")) == sorted(other_ids["live"])
    assert complete(["--vault", str(tmp_path / "none"), "add", "-c"], "") == []


def test_completion_imports_nothing_heavy(hand_vault):
    code = (
        "import sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_completion import complete\n"
        "assert complete(['add', '-c'], '')\n"
        "assert complete(['show'], '')\n"
        "heavy = [m for m in ('lancedb', 'fastembed', 'litellm', 'git', 'onnxruntime', 'pyarrow') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- bash ---------------------------------------------------------------------------------------

def bash_complete(words: list[str], env: dict | None = None) -> list[str]:
    script = (
        f"source {BASH}\n"
        'COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()\n'
        "_memvault\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", *words], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_bash_commands_options_and_choices(hand_vault):
    assert "show" in bash_complete(["memvault", ""]) and "rm" in bash_complete(["memvault", ""])
    assert bash_complete(["memvault", "--va"]) == ["--vault"]
    assert bash_complete(["memvault", "search", "--format", ""]) == ["text", "prompt", "json"]
    assert bash_complete(["memvault", "search", "--format", "=", "p"]) == ["prompt"]  # --format=p
    assert bash_complete(["memvault", "add", "--ki"]) == ["--kind"]
    assert bash_complete(["memvault", "show", "--r"]) == ["--raw"]
    assert bash_complete(["memvault", "add", "--tag", ""]) == []  # free text: nothing to offer


def test_bash_dynamic_values(hand_vault, tmp_path):
    root, ids = hand_vault
    # a/b lives in a hashed-slug folder: not offered by the shell scripts
    assert bash_complete(["memvault", "add", "-c", ""]) == ["global", "work"]
    assert sorted(bash_complete(["memvault", "rm", ""])) == sorted(ids["live"])
    assert sorted(bash_complete(["memvault", "show", ""])) == sorted(ids["live"] + ids["deleted"])
    other = tmp_path / "other"
    other_ids = make_vault(other)
    assert sorted(bash_complete(["memvault", "--vault", str(other), "edit", ""])) == sorted(other_ids["live"])
    assert bash_complete(["memvault", "--vault", str(tmp_path / "none"), "edit", ""]) == []
    assert sorted(bash_complete(["memvault", "log", ""], env={"MEMVAULT_DIR": str(other)})) == \
        sorted(other_ids["live"] + other_ids["deleted"])


def test_bash_files_with_spaces(hand_vault, tmp_path):
    (tmp_path / "my notes.md").write_text("x")
    assert bash_complete(["memvault", "add", "--file", str(tmp_path / "my")]) == [str(tmp_path / "my notes.md")]


# -- zsh and fish (when installed) --------------------------------------------------------------

@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_zsh_script_completes(hand_vault):
    root, ids = hand_vault
    assert subprocess.run(["zsh", "-n", str(ZSH_DIR / "_memvault")]).returncode == 0

    def zsh_complete(line: str) -> list[str]:
        done = subprocess.run(["zsh", "-f", str(ZSH_CAPTURE), str(ZSH_DIR), line], capture_output=True,
                              text=True, timeout=60)
        return sorted(set(done.stdout.split()))

    assert "show" in zsh_complete("memvault ") and "summarize" in zsh_complete("memvault ")
    assert zsh_complete("memvault add --kind ") == ["decision", "fact", "note"]
    assert zsh_complete("memvault add -c ") == ["global", "work"]
    assert zsh_complete("memvault rm ") == sorted(ids["live"])
    assert zsh_complete("memvault show ") == sorted(ids["live"] + ids["deleted"])
    assert "--raw" in zsh_complete("memvault show -")


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed")
def test_fish_script_completes(hand_vault):
    root, ids = hand_vault

    def fish_complete(line: str) -> list[str]:
        done = subprocess.run(["fish", "--no-config", "-c", f"source {FISH}; complete -C{line!r}"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return sorted(row.split("\t")[0] for row in done.stdout.splitlines())

    assert "edit" in fish_complete("memvault ") and "add" in fish_complete("memvault ")
    assert fish_complete("memvault add --kind ") == ["decision", "fact", "note"]
    assert fish_complete("memvault add -c ") == ["global", "work"]
    assert fish_complete("memvault edit ") == sorted(ids["live"])
    assert fish_complete("memvault show ") == sorted(ids["live"] + ids["deleted"])
    other = root.parent / "other"
    other_ids = make_vault(other)
    assert fish_complete(f"memvault --vault {other} rm ") == sorted(other_ids["live"])
    assert "--raw" in fish_complete("memvault show --")
