"""Docs tied to the code: generated files match the live CLI; README and man page cover every
command and option; the man page renders without warnings.

When this fails after a CLI change: run `python tools/gendocs.py`, then describe the new command or
option in README.md's Commands section (see README.md, Development).
"""

import importlib.util
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

spec = importlib.util.spec_from_file_location("gendocs", REPO / "tools" / "gendocs.py")
gendocs = importlib.util.module_from_spec(spec)
sys.modules["gendocs"] = gendocs
spec.loader.exec_module(gendocs)

README = (REPO / "README.md").read_text(encoding="utf-8")
CLI = gendocs.load_cli()


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def long_options(options) -> list[str]:
    return [name for opt in options for name in opt.long if name != "--help"]


# -- generated files ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", [gendocs.BASH, gendocs.ZSH, gendocs.FISH, gendocs.MAN], ids=lambda p: p.name)
def test_generated_file_matches_the_cli(path):
    expected = gendocs.outputs()[path]
    assert path.read_text(encoding="utf-8") == expected, \
        f"{path.relative_to(REPO)} is out of date: run `python tools/gendocs.py`"


def test_check_mode_reports_drift(tmp_path, monkeypatch):
    done = subprocess.run([sys.executable, "tools/gendocs.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    stale = tmp_path / "memvault.1"
    stale.write_text(".TH OLD 1\n")
    monkeypatch.setattr(gendocs, "MAN", stale)
    monkeypatch.setattr(gendocs, "REPO", tmp_path)
    assert gendocs.main(["--check"]) == 1
    assert stale.read_text() == ".TH OLD 1\n"  # --check writes nothing


def test_generation_is_deterministic():
    assert gendocs.outputs() == gendocs.outputs()


def test_every_setting_is_described():
    import dataclasses

    from memvault.store.config import Settings

    assert {f.name for f in dataclasses.fields(Settings)} == set(gendocs.SETTING_HELP)


def test_bash_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(gendocs.BASH)]).returncode == 0


# -- the man page -------------------------------------------------------------------------------

@pytest.mark.skipif(not shutil.which("groff"), reason="groff is not installed (apt-get install groff-base)")
def test_man_page_renders_without_warnings():
    done = subprocess.run(["groff", "-man", "-ww", "-z", str(gendocs.MAN)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = subprocess.run(["groff", "-man", "-Tutf8", "-P-c", str(gendocs.MAN)], capture_output=True,
                          text=True, check=True).stdout
    plain = re.sub(r".\x08", "", text)
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "ENVIRONMENT", "FILES",
                    "EXIT STATUS", "EXAMPLES", "SEE ALSO"):
        assert f"\n{heading}\n" in plain
    assert "memvault search -k 3 --json" in plain and "MEMVAULT_LLM_API_KEY" in plain


def man_sections() -> dict[str, str]:
    source = gendocs.MAN.read_text(encoding="utf-8")
    parts = re.split(r'^\.SS "memvault (\S+?)[" ]', source, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_man_page_has_every_command_and_option():
    source = gendocs.MAN.read_text(encoding="utf-8")
    sections = man_sections()
    for option in long_options(CLI.global_options):
        assert option.replace("-", "\\-") in source.split(".SH COMMANDS")[0], option
    for cmd in CLI.commands:
        assert cmd.name in sections, f"man page: no section for `memvault {cmd.name}`"
        for option in long_options(cmd.options):
            assert option.replace("-", "\\-") in sections[cmd.name], f"man page: `{cmd.name} {option}` missing"
    for name in ("MEMVAULT_DIR", "MEMVAULT_LLM_API_KEY", "memvault.toml", ".memvault/"):
        assert name.replace("-", "\\-") in source


# -- README -------------------------------------------------------------------------------------

def readme_commands() -> dict[str, str]:
    text = section(README, "Commands")
    parts = re.split(r"^- \*\*`memvault (\S+?)[` ]", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_readme_has_every_command_and_option():
    intro = section(README, "Commands").split("\n- **")[0]
    for option in long_options(CLI.global_options):
        assert mentions(intro, option), f"README Commands: global option {option} missing"
    entries = readme_commands()
    missing = []
    for cmd in CLI.commands:
        if cmd.name not in entries:
            missing.append(f"`memvault {cmd.name}` (no '- **`memvault {cmd.name}' entry)")
            continue
        missing += [f"`memvault {cmd.name} {o}`" for o in long_options(cmd.options) if not mentions(entries[cmd.name], o)]
    assert not missing, "README.md, section Commands, does not describe: " + ", ".join(missing)


def test_readme_settings_table_lists_every_key_with_default_and_variable():
    table = section(README, "Settings")
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", table, flags=re.M)}
    for key, default, _help in gendocs.settings_rows():
        assert key in rows, f"README settings table: {key} missing"
        assert f"`MEMVAULT_{key.upper()}`" in rows[key]
        assert (f"`{default}`" if default != "unset" else "unset") in rows[key], (key, default)
    assert "MEMVAULT_DIR" in table and "MEMVAULT_LLM_API_KEY" in table


def test_readme_says_how_to_install_completions_and_read_the_man_page():
    install = section(README, "Shell completion and man page")
    for name in ("completions/memvault.bash", "completions/_memvault", "completions/memvault.fish",
                 "man -l man/memvault.1"):
        assert name in install


def test_readme_keeps_the_set_up_commands_and_the_rest():
    setup = section(README, "Set up")
    commands = [line for line in setup.splitlines() if line.startswith("python3 -m pip install")]
    assert len(commands) == 2
    demo, test_command = commands
    assert "memvault add " in demo and "memvault search " in demo  # installs, then runs the main job
    # CI runs exactly the test commands the README gives: the default run, then the slow tests.
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in ci
    assert "python3 -m pytest -q -m slow -n 2" in setup.splitlines() and ci[-1] == "python3 -m pytest -q -m slow -n 2"
    oneliners = section(README, "One-liners")
    for piece in ("| memvault add", "memvault search -k 3 --json", "| jq", "* * *", "$EDITOR", "memvault reindex",
                  'git -C "$MEMVAULT_DIR" log -p'):
        assert piece in oneliners
    models = section(README, "Models")
    for piece in ("all-MiniLM-L6-v2", "int8", "embedding_model", "memvault models --download", "reranker_model",
                  "folder"):
        assert piece in models
    llm = section(README, "The LLM")
    for piece in ("Ollama", "http://localhost:11434/v1", "llm_base_url", "llm_model", "MEMVAULT_LLM_API_KEY"):
        assert piece in llm
    codes = section(README, "Output and exit codes")
    assert "| 0 |" in codes and "| 1 |" in codes and "| 2 |" in codes
    assert "python tools/gendocs.py" in section(README, "Development")


# -- docs/design.md against the code ------------------------------------------------------------------

DESIGN = REPO / "docs" / "design.md"
NUMBERS = {"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def design_section(number: int) -> str:
    text = DESIGN.read_text()
    start = text.index(f"\n## {number}. ")
    return text[start:text.index("\n## ", start + 1)]


def test_design_lists_every_public_member_of_memvault():
    """Section 11's list of Memvault's members (it missed 14 of them): every public one is there, and
    nothing it names is gone."""
    from memvault.api import Memvault

    span = design_section(11)
    span = span[span.index("returns a `Memvault` with one"):span.index("Also `memvault.clone_vault")]
    listed = set(re.findall(r"`([a-z_]+)`", span))
    public = {name for name in vars(Memvault) if not name.startswith("_")}
    assert public - listed == set(), "missing from docs/design.md section 11"
    assert listed - public == set(), "named in docs/design.md section 11, not on Memvault"


def test_design_counts_the_mcp_tools():
    import anyio
    from mcp import Client

    import memvault
    from memvault.faces.mcp_server import build_server

    said = re.search(r"(\w+) tools,\s+each one library call", design_section(11))
    assert said, "docs/design.md section 11 no longer says how many MCP tools there are"
    vault = memvault.open_vault(REPO / "no-such-vault-here")

    async def names():
        async with Client(build_server(vault)) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    tools = anyio.run(names)
    assert NUMBERS[said[1].lower()] == len(tools), tools
    for name in tools:
        assert f"`{name}`" in design_section(11), name


def test_every_section_the_code_cites_is_there():
    """Comments cite design.md's sections by title ("Summaries" and "serve" were none)."""
    titles = re.findall(r"^## \d+\. (.+)$", DESIGN.read_text(), re.M)
    cited = set()
    for path in [*(REPO / "memvault").rglob("*.py"), *(REPO / "tests").glob("*.py"), *(REPO / "bench").glob("*.py")]:
        cited |= {(" ".join(title.replace("#", " ").split()), path.name)  # a title that runs over a comment's lines
                  for title in re.findall(r'design\.md,? "([^"]+)"', path.read_text())}
    unknown = sorted((title, where) for title, where in cited if not any(t.startswith(title) for t in titles))
    assert unknown == []
