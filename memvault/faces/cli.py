"""The `memvault` command line: a thin layer over the library (memvault/api.py).

Each command parses its options, makes one call to the library and renders the result: text,
or JSON with `--json`. Results go to stdout, everything else to stderr. Errors are
MemvaultErrors, turned into one line and an exit code in one place (MemvaultGroup). Heavy
modules (lancedb, fastembed, litellm) load inside the library calls that need them, so that
`memvault --help` stays fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Iterable, Optional

import typer
from typer.core import TyperGroup

from memvault import __version__
from memvault.faces import term
from memvault.faces.completion import complete_conversation, complete_live_memory_id, complete_memory_id
from memvault.errors import MemvaultError, UsageError, answer_for
from memvault.faces.cli_options import takes
from memvault.request_options import ADD, CHAT, DELETE, GET, LOG, RECENT, REVIEW, SEARCH, STATS


# Options of the whole program that are also taken after the command (`memvault search -q ...`),
# as `--json` is by every command.
_ANYWHERE = {"-q", "--quiet", "-v", "--verbose"}


def _plain_flags(params) -> None:
    """Flags show as `--each-line`, not `--each-line <bool>`."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class MemvaultGroup(TyperGroup):
    """Turns library errors into one line on stderr and the right exit code; takes -q and -v
    after the command as well as before it."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, self._hoist(ctx, list(args)))

    def _hoist(self, ctx, args: list[str]) -> list[str]:
        """Move -q/-v found among a command's own arguments to before the command. Values of the
        command's options that take one are left alone (`--tag -v` is a tag), and so is
        everything after `--`."""
        takes_value = {"--vault"}
        position = 0
        while position < len(args) and args[position].startswith("-"):
            position += 2 if args[position] in takes_value else 1
        if position >= len(args):
            return args
        command = self.get_command(ctx, args[position])
        if command is None:
            return args
        for param in command.params:
            if not getattr(param, "is_flag", True) and getattr(param, "param_type_name", "") == "option":
                takes_value.update(param.opts)
        moved, rest, skip = [], args[:position + 1], False
        for index, arg in enumerate(args[position + 1:], position + 1):
            if arg == "--":
                rest += args[index:]
                break
            if skip:
                rest.append(arg)
                skip = False
            elif arg in _ANYWHERE:
                moved.append(arg)
            else:
                rest.append(arg)
                skip = arg in takes_value
        return moved + rest

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None:
            _plain_flags(command.params)
            help_option = command.get_help_option(ctx)
            if help_option is not None:
                _plain_flags([help_option])
        return command

    def get_params(self, ctx):
        params = super().get_params(ctx)
        _plain_flags(params)
        return params

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # `memvault log | head`: the reader left; that is not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(0) from None
        except Exception as exc:
            failure = answer_for(exc)  # the one table every face reads (errors.py)
            if not failure.expected:  # typer's own exits, and bugs (their traceback)
                raise
            _error(self._in_flags(ctx, failure))
            raise typer.Exit(failure.answer.exit_code) from None

    def _in_flags(self, ctx, failure) -> str:
        """The library's message with each parameter it names (`since`) as the command's flag
        (`--since`): the library speaks of its arguments, the CLI of its options."""
        message = failure.message
        command = self.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
        if not failure.params or command is None:
            return message
        options = [p for p in command.params if getattr(p, "param_type_name", "") == "option"]
        for sub in getattr(command, "commands", {}).values():  # `memvault import chatgpt ...`
            options += [p for p in sub.params if getattr(p, "param_type_name", "") == "option"]
        for name in failure.params:
            flag = next((max(p.opts, key=len) for p in options if p.name in (name, name.rstrip("s"))), None)
            if flag:
                message = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", flag, message, count=1)
        return message


app = typer.Typer(
    cls=MemvaultGroup,
    name="memvault",
    help="Long-term memory for LLM work: a git-versioned folder of markdown memories.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class State:
    vault_path: Optional[Path] = None
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)

    def open(self, **overrides: Any):
        """The vault, through the library, with notices on stderr unless -q."""
        from memvault.api import open_vault

        return open_vault(self.vault_path, notice=self.notice, **{**self.overrides, **overrides})

    def notice(self, message: str) -> None:
        if not self.quiet and message:
            sys.stderr.write(message.rstrip("\n") + "\n")
            sys.stderr.flush()


def _exclusive(ctx: typer.Context, *names: str) -> None:
    """A usage error when more than one of these options was given on the command line."""
    from typer._click.core import ParameterSource

    given = [name for name in names if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if len(given) > 1:
        flags = {p.name: "/".join(p.opts) for p in ctx.command.params}
        raise UsageError(f"{flags[given[0]]} and {flags[given[1]]} do not go together")


def _mtime(path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _state(ctx: typer.Context) -> State:
    return ctx.find_root().obj


def json_option(help: str) -> Any:
    """The `--json` of every command, declared once here (each command says what it prints); the
    global `memvault --json` (main_options) means the same for every command (`json_output or state.json`)."""
    return typer.Option(False, "--json", help=help)


def _error(message: str) -> None:
    sys.stderr.write(f"memvault: error: {message}\n")
    sys.stderr.flush()


def info(ctx: typer.Context, message: str) -> None:
    """Progress and notices: stderr, silenced by -q."""
    if not _state(ctx).quiet:
        sys.stderr.write(message + "\n")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def emit_json_rows(rows: Iterable[Any]) -> None:
    """emit_json of a list, byte for byte, written a row at a time (an add of 100,000 lines)."""
    opened = False
    for row in rows:
        text = json.dumps(row, ensure_ascii=False, indent=2, default=str).replace("\n", "\n  ")
        sys.stdout.write(("," if opened else "[") + "\n  " + text)
        opened = True
    sys.stdout.write("\n]\n" if opened else "[]\n")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memvault {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    vault: Optional[Path] = typer.Option(
        None, "--vault", metavar="PATH",
        help="Vault folder (default: $MEMVAULT_DIR, else ~/.local/share/memvault).",
    ),
    json_output: bool = json_option("Machine-readable JSON on stdout."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Only results and errors."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="More detail on stderr."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    term.configure(quiet=quiet)
    ctx.obj = State(vault_path=vault, json=json_output, quiet=quiet, verbose=verbose)


class Kind(str, Enum):
    fact = "fact"
    note = "note"
    decision = "decision"


def _read_stdin(ctx: typer.Context) -> str:
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError("no text given: pass TEXT, --file PATH, or pipe text on stdin")
    return _decode(sys.stdin.buffer.read(), "stdin")


def _decode(data: bytes, origin: str) -> str:
    try:
        return data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{origin} is not UTF-8 text (byte {exc.start})") from None


def _read_path(path: Path) -> str:
    try:
        return _decode(path.read_bytes(), str(path))
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder, not a file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


@app.command()
@takes(ADD)
def add(
    ctx: typer.Context,
    asked: dict,
    text: Optional[list[str]] = typer.Argument(None, help="Memory text, one argument (quote it: \"...\"); none or "
                                                          "'-' reads stdin. Several arguments are refused: for "
                                                          "several memories, --each-line or --jsonl."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Read the text from a file."),
    jsonl: Optional[str] = typer.Option(
        None, "--jsonl", metavar="FILE|-",
        help="One JSON object per line: text, and optional conversation_id, created_at, kind, role "
             "(user or assistant: a chat turn), tags, source, rationale, alternatives, meta.",
    ),
    json_output: bool = json_option("Print the stored memories as JSON."),
) -> None:
    """Store memories: from an argument, stdin, --file or --jsonl.

    The text is one argument: `memvault add "I live in Lisbon"`. Several arguments are an error (exit 2, nothing stored): whether `add A B` meant one memory or two cannot be told, and a wrong guess would store the wrong memories. --each-line stores one memory per line.

    A text that a live memory of the same conversation and kind already holds word for word is not
    stored again (it says which one holds it), so a cron job can add the same file every night.
    """
    state = _state(ctx)
    as_json = json_output or state.json
    if text and len(text) > 1:  # not echoed back: it may hold a password
        raise UsageError(f"add takes the text as one argument and got {len(text)}: quote it (memvault add \"...\") "
                         "for one memory; for several, one per line with --each-line (or --jsonl)")
    sources = [bool(text and text != ["-"]), file is not None, jsonl is not None]
    if sum(sources) > 1:
        raise UsageError("give the text one way: arguments, --file or --jsonl")
    extract = asked.get("extract", False)
    if extract and jsonl is None:  # refused before anything is opened (add checks it again)
        from memvault.api import Memvault

        Memvault.check_extract(**{k: v for k, v in asked.items() if k not in ("conversation", "each_line", "extract")})
    vault = state.open()
    started = time.perf_counter()
    with term.progress_bar(not state.quiet, label="adding") as bar:
        if jsonl is not None:
            raw = _read_stdin(ctx) if jsonl == "-" else _read_path(Path(jsonl))
            defaults = {k: v for k, v in asked.items() if k not in ("each_line", "allow_duplicate", "extract")}
            defaults["conversation_id"] = defaults.pop("conversation", "global")
            added = vault.add_jsonl(raw, "stdin" if jsonl == "-" else jsonl, allow_duplicate=asked.get("allow_duplicate",
                                    False), extract=extract, progress=bar, **defaults)
        else:
            raw = _read_path(file) if file is not None else (text[0] if text and text != ["-"] else _read_stdin(ctx))
            added = vault.add(raw, progress=bar, **asked)
            if extract:
                _print_learned(ctx, added.learned, as_json, stream=sys.stdout)
                return
    for new, held in added.duplicates:
        info(ctx, f"memvault: already stored as {held.id}: {new.first_line(60)} (--allow-duplicate stores it again)")
    if state.verbose:
        info(ctx, f"memvault: stored and indexed {len(added)} in {time.perf_counter() - started:.2f} s"
                  + (f", commit {added.commit[:8]}" if added.commit else ""))
    if as_json:
        emit_json_rows(added.json_rows(vault.root))
    else:
        for memory in added:
            typer.echo(f"{memory.id}  {vault.relative(memory.path)}")
    for closed in added.episodes:
        info(ctx, episode_line(closed))
    if added.learned is not None:
        for line in change_lines(added.learned.to_json()):
            info(ctx, f"memvault: {line}")


def _print_learned(ctx, learned, as_json: bool, stream) -> None:
    """What a message taught the vault: one line per change (ADD, UPDATE, REPLACE, DELETE, EVICT)."""
    rows = learned.to_json()
    if as_json:
        emit_json(rows)
        return
    if not rows:
        info(ctx, "memvault: no facts found")
    for line in change_lines(rows):
        stream.write(line + "\n")


def episode_line(closed) -> str:
    """An episode just written (episodes.Closed), as one notice line."""
    return (f"memvault: episode {closed.episode.id[:8]} \"{closed.episode.extra.get('title')}\" "
            f"({len(closed.segment.turns)} turns, {closed.segment.boundary})")


change_lines = term.change_lines  # each change as one line (also what serve logs)


_ACTION_MARKS = {"added": "+", "edited": "~", "deleted": "-", "replaced": ">", "evicted": "x", "resolved": "=",
                 "removed": "!", "restored": "^", "purged": "!", "scrubbed": "*"}


# `log` lists this many changes of one commit unless -v or --json (an import is one commit of thousands).
LOG_CHANGES_SHOWN = 20


@app.command()
@takes(LOG)
def log(
    ctx: typer.Context,
    asked: dict,
    json_output: bool = json_option("Print the history as JSON."),
) -> None:
    """History of memory changes, from git.

    Each change shows its kind; an edit shows before -> after; a replacement, deletion or eviction names its cause in brackets (the chat message a learned fact came from, else the command)."""
    state = _state(ctx)
    every = json_output or state.json or state.verbose
    entries = state.open().log(**asked, max_changes=None if every else LOG_CHANGES_SHOWN)
    if json_output or state.json:
        emit_json([e.to_json() for e in entries])
        return
    for entry in entries:
        typer.echo(f"{entry.date:%Y-%m-%d %H:%M:%S}  {entry.command}  {entry.commit[:8]}  {entry.subject}")
        for change in entry.changes:
            mark = _ACTION_MARKS.get(change.action, "?")
            text = f"{change.before}  -> {change.text}" if change.before is not None else change.text
            tail = f"  -> {change.replaced_by[:8]}" if change.replaced_by else ""
            reason = f" ({change.reason})" if change.reason and change.action in ("deleted",) else ""
            cause = f"  [{change.cause}]" if change.cause else ""
            typer.echo(f"  {mark} {change.action:<8} {change.id[:8]}  {change.kind or '?':<8} {text}{reason}{tail}{cause}")
        if entry.changes_total > len(entry.changes):
            typer.echo(f"  … and {entry.changes_total - len(entry.changes):,} more (-v or --json lists them all)")


@app.command()
@takes(GET)
def show(
    ctx: typer.Context,
    asked: dict,
    raw: bool = typer.Option(False, "--raw", help="Print the file's bytes as they are."),
    json_output: bool = json_option("Print the memory as JSON."),
) -> None:
    """Show one memory: its front matter as a key list, then its text. Deleted ones too."""
    state = _state(ctx)
    as_json = json_output or state.json
    if raw and as_json:
        raise UsageError("--raw and --json do not go together")
    if raw and asked.get("as_of"):
        raise UsageError("--raw prints the file as it is now; --as-of shows the memory as it was: not together")
    vault = state.open()
    memory = vault.get(**asked)
    if raw:
        sys.stdout.flush()
        sys.stdout.buffer.write(memory.path.read_bytes())
        sys.stdout.flush()
    elif as_json:
        emit_json(memory.to_json(vault.root))
    else:
        _print_memory(vault, memory)


def _print_memory(vault, memory) -> None:
    rows = _front_matter_rows(vault, memory)
    if term.color_allowed(sys.stdout):
        from rich.console import Console
        from rich.markdown import Markdown
        from rich.table import Table
        from rich.text import Text

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, value in rows:
            table.add_row(Text(key), Text(value))
        console = Console()
        console.print(table)
        console.print()
        console.print(Markdown(memory.text))
        return
    width = max(len(key) for key, _ in rows)
    for key, value in rows:
        typer.echo(f"{key:<{width}}  {value}".rstrip())
    typer.echo("")
    typer.echo(memory.text)


def _front_matter_rows(vault, memory) -> list[tuple[str, str]]:
    """The front matter as (key, value) rows for display, then the file's path."""
    from memvault.store.files import json_safe as files_json_safe

    rows = []
    for key, value in memory.front_matter().items():
        value = files_json_safe(value)  # a date as JSON shows it: ISO 8601
        if isinstance(value, (list, tuple)):
            shown = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            shown = json.dumps(value, ensure_ascii=False, default=str)
        elif isinstance(value, bool):
            shown = "true" if value else "false"
        else:
            shown = "" if value is None else str(value)
        rows.append((key, shown))
    if memory.path is not None:
        rows.append(("path", vault.relative(memory.path)))
    if memory.as_of is not None and memory.deleted_since:
        rows.append(("deleted since", memory.deleted_since))
    if memory.edited_since:
        rows.append(("edited since", f"{memory.edited_since}: " + (
            "the text below is as it was then" if memory.edited_text_of == "then" else
            "the text below is today's; the one of then is not in the history")))
    return rows


@app.command()
def edit(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="Memory id or unique prefix (at least 4 characters).",
                                    autocompletion=complete_live_memory_id),
    json_output: bool = json_option("Print the memory after the edit as JSON."),
) -> None:
    """Edit a memory in $VISUAL or $EDITOR (else vi), then validate, re-index and commit.

    The editor works on a copy. A broken edit changes nothing: the memory stays as it was
    and the rejected text is kept in .memvault/rejected/ (never committed).
    """
    state = _state(ctx)
    interactive = term.is_terminal(sys.stdin) and term.is_terminal(sys.stderr)
    chosen = (os.environ.get("VISUAL") or "").strip() or (os.environ.get("EDITOR") or "").strip()
    if not chosen and not (term.is_terminal(sys.stdin) and (term.is_terminal(sys.stdout) or interactive)):
        # vi, the editor of last resort, needs one: refused before anything is opened
        raise UsageError(f"memvault edit needs a terminal for vi (neither $VISUAL nor $EDITOR is set); run it in one, "
                         f"or name an editor that opens its own window: `EDITOR='code -w' memvault edit "
                         f"{memory_id.strip()[:8]}`")
    vault = state.open()
    result = vault.edit(memory_id, retry=_ask_edit_again if interactive else None)
    if json_output or state.json:
        emit_json({**result.memory.to_json(vault.root), "changed": result.changed})
    elif result.changed:
        typer.echo(f"{result.memory.id}  {vault.relative(result.memory.path)}")
    else:
        info(ctx, f"memvault: {result.memory.id} unchanged")


def _ask_edit_again(reason: str) -> bool:
    sys.stderr.write(f"memvault: {reason}\nEdit again? [Y/n] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return bool(answer) and answer.strip().lower() in ("", "y", "yes")


@app.command()
@takes(DELETE)
def rm(
    ctx: typer.Context,
    asked: dict,
    json_output: bool = json_option("Print the removed memories as JSON."),
) -> None:
    """Remove memories: a soft delete (moved under deleted/, reason user), committed."""
    state = _state(ctx)
    vault = state.open()
    removed = vault.remove(**asked)
    if json_output or state.json:
        emit_json([m.to_json(vault.root) for m in removed])
    else:
        for memory in removed:
            typer.echo(f"removed {memory.id}  [{memory.role}] {memory.first_line(60)}")



@app.command(name="ls")
@takes(RECENT)
def list_memories(
    ctx: typer.Context,
    asked: dict,
    all_conversations: bool = typer.Option(False, "--all-conversations", "-a",
                                           help="Every conversation (the default without -c)."),
    json_output: bool = json_option("Print the memories as JSON."),
) -> None:
    """List memories without a query, newest first: id, date, kind, conversation, text. When there
    are more, the cursor of the next page is said on stderr (`--cursor`)."""
    _exclusive(ctx, "all_conversations", "conversation")
    _exclusive(ctx, "deleted", "as_of")
    state = _state(ctx)
    vault = state.open()
    deleted = asked.get("deleted", False)
    memories = vault.recent(**asked)
    if memories.next_cursor is not None:
        state.notice(f"memvault: more: --cursor {memories.next_cursor}")
    if json_output or state.json:
        emit_json([m.to_json(vault.root) for m in memories])
        return
    width = shutil.get_terminal_size((100, 24)).columns if term.is_terminal(sys.stdout) else 200
    for m in memories:
        head = f"{m.id[:8]}  {m.created_at:%Y-%m-%d %H:%M}  {m.kind:<8} {m.conversation_id:<12} "
        reason = f"[{m.extra.get('deleted_reason')}] " if deleted else ""
        text = reason + " ".join(m.text.split())
        room = max(width - len(head), 10)
        typer.echo(head + (text if len(text) <= room else text[:room - 1] + "…"))


@app.command()
def conversations(
    ctx: typer.Context,
    json_output: bool = json_option("Print the list as JSON."),
) -> None:
    """List the conversations: memories by kind, newest activity, whether there is a summary."""
    state = _state(ctx)
    listing = state.open().conversations()
    if json_output or state.json:
        emit_json([c.to_json() for c in listing])
        return
    for c in listing:
        kinds = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(c.counts.items()))
        newest = f"{c.newest:%Y-%m-%d %H:%M}" if c.newest else "-"
        typer.echo(f"{c.id:<24} {newest}  {kinds or 'empty'}"
                   + (f", {c.deleted} deleted" if c.deleted else "") + ("  [summary]" if c.has_summary else ""))


@app.command()
@takes(STATS)
def stats(
    ctx: typer.Context,
    asked: dict,
    json_output: bool = json_option("Print the numbers as JSON."),
) -> None:
    """The vault in numbers: memories by kind and conversation, index, models, last commit, disk use."""
    state = _state(ctx)
    data = state.open().stats(**asked).to_json()
    if json_output or state.json:
        emit_json(data)
        return
    kinds = ", ".join(f"{n} {kind}" for kind, n in data["by_kind"].items())
    typer.echo(f"vault          {data['vault']}")
    typer.echo(f"memories       {data['memories']} ({kinds or 'none'}), {data['deleted']} deleted, "
               f"{len(data['conversations'])} conversation(s)"
               + (f", {data['skipped']} file(s) left out" if data["skipped"] else ""))
    index = data["index"]
    typer.echo(f"index          {index['rows']} rows, " + ("in step" if index["in_step"] else
                                                               f"out of step: {index['out_of_step']}")
               + (f", built with {index['model']}" if index["model"] else ""))
    if not index["in_step"]:
        drift = index["drift"]
        if drift["added"] or drift["changed"] or drift["removed"] or drift["rebuild"] or drift.get("unscrubbed"):
            typer.echo("               `memvault reindex` brings it in step")
        if drift["skipped"]:
            typer.echo("               `memvault reindex --check` names the files left out and why")
    models = data["models"]
    typer.echo(f"models         {models['embedding_model']}; reranker {models['reranker_model']}; "
               f"llm {models['llm_model']}")
    waiting = data["review"]
    typer.echo(f"review         {waiting['pending']} waiting, {waiting['proposal']} proposal(s) to retire a fact "
               f"you added, {waiting['learned']} learned fact(s) not reviewed (`memvault review`)")
    last = data["last_commit"]
    if last:
        typer.echo(f"last commit    {last['commit'][:8]} {last['date']}  {last['subject']}")
    disk = data["disk"]
    typer.echo(f"disk           entries {_size(disk['entries'])}, index {_size(disk['index'])}, "
               f"git {_size(disk['git'])}")


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"


@app.command()
def undo(
    ctx: typer.Context,
    commit: Optional[str] = typer.Argument(None, metavar="[COMMIT]",
                                           help="The memvault commit to take back (default: the newest)."),
    json_output: bool = json_option("Print what was done as JSON."),
) -> None:
    """Take back one memvault change, as a new commit.

    What it added is taken out, what it replaced, evicted or deleted is live again, and the index
    follows. Only memvault's own commits, and only when their files have not changed since.
    """
    state = _state(ctx)
    result = state.open().undo(commit)
    if json_output or state.json:
        emit_json(result.to_json())
        return
    info(ctx, f"memvault: took back {result.commit[:8]} ({result.subject})")
    for line in change_lines([e.to_json() for e in result.events]):
        typer.echo(line)


@app.command()
def restore(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="A deleted or replaced memory (id or unique prefix).",
                                    autocompletion=complete_memory_id),
    json_output: bool = json_option("Print the restored memory as JSON."),
) -> None:
    """Bring one deleted or replaced memory back live, committed."""
    state = _state(ctx)
    vault = state.open()
    event = vault.restore(memory_id)
    if json_output or state.json:
        emit_json(event.memory.to_json(vault.root))
    else:
        typer.echo(change_lines([event.to_json()])[0])


class OutputFormat(str, Enum):
    text = "text"
    prompt = "prompt"
    json = "json"


@app.command()
@takes(SEARCH)
def search(
    ctx: typer.Context,
    asked: dict,
    explain: bool = typer.Option(False, "--explain", help="Show every score of every result."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format",
                                               help="text (a line a result: score, short id, day, [role], text), "
                                                    "prompt (the block a chat injects: today's date, the "
                                                    "memories by day, oldest first, dates in words, relative times "
                                                    "resolved, an earlier memory marked with what replaced it) "
                                                    "or json."),
    queries: Optional[str] = typer.Option(None, "--queries", metavar="FILE|-",
                                          help='Many searches: JSON lines {"qid", "query", "conversation_id"?, '
                                               '"now"?, "k"?}; prints {"qid", "results"} lines.'),
    json_output: bool = json_option("Results as JSON."),
) -> None:
    """Search memories: hybrid retrieval, rerank, recency, diversity.

    Times the query names ("last week", "in May 2023", "two years ago") are read against the clock
    (--now) and lift the memories created then; a "when" question lifts the memories whose words say
    when ("yesterday", "last Friday"). --explain shows what each gained (time)."""
    state = _state(ctx)
    query = asked.pop("query", None)
    if query is None and queries is None:
        raise UsageError("give a QUERY or --queries FILE")
    vault = state.open()
    if queries is not None:
        raw = _read_stdin(ctx) if queries == "-" else _read_path(Path(queries))
        origin = "stdin" if queries == "-" else queries
        for qid, outcome in vault.search_many(_json_lines(raw, origin), origin=origin, **asked):
            sys.stdout.write(json.dumps({"qid": qid, "results": outcome.to_json()}, ensure_ascii=False) + "\n")
        return
    conversation = asked.get("conversation") or "global"
    outcome = vault.search(query, **asked)
    if outcome.rerank_note and not outcome.note_shown and (explain or state.verbose) and not outcome.reranked:
        info(ctx, f"memvault: {outcome.rerank_note}")
    if state.verbose:
        stages = ", ".join(f"{stage} {seconds * 1000:.0f} ms" for stage, seconds in outcome.timings.items())
        info(ctx, f"memvault: {len(outcome.results)} results; {stages}")
    if json_output or state.json or output_format == OutputFormat.json:
        emit_json(outcome.to_json())
    elif output_format == OutputFormat.prompt:
        typer.echo(vault.prompt_block(outcome, conversation))
    elif explain:
        _print_explain(outcome)
    else:
        for r in outcome.results:
            earlier = f"  {r.earlier}" if r.superseded else ""
            # the day it was said, in words: "when did I tell you" is answered from the list
            typer.echo(f"{r.score:.3f}  {r.id[:8]}  {r.day}  [{r.role}] {r.shown_text}{earlier}")
    if not (json_output or state.json or output_format != OutputFormat.text):
        for note in outcome.notes():
            info(ctx, f"memvault: {note}")
    elif outcome.full_text_damaged:  # in every format: the results are not what the index would give
        info(ctx, f"memvault: {outcome.damage_note()}")


def _json_lines(raw: str, origin: str):
    """`search --queries`: one JSON object a line (blank lines skipped), each a search request for the
    library; a line that is not one is a usage error naming it."""
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{origin} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(request, dict) or not isinstance(request.get("query"), str):
            raise UsageError(f"{origin} line {number}: expected an object with a 'query' string")
        yield request


def _print_explain(outcome) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=None, show_lines=False)
    asked = getattr(outcome, "time_read", None)  # the time column only when the query names a time or asks when
    parts = getattr(outcome, "parts", ())  # the part column only when the question was searched in parts
    # the speaker column only when the question named one of the chat's speakers (retrieval._speaker_focus)
    spoke = any("speaker" in r.scores for r in outcome.results)
    asks = any("asking" in r.scores for r in outcome.results)  # a chat line that asks (retrieval._asking_focus)
    columns = ["mmr", "id", "dense", "bm25", "rrf", "fused", "match", "logit", *(["speaker"] if spoke else []),
               *(["asking"] if asks else []),
               "session", *(["time"] if asked else []),
               *(["part"] if parts else []), "relevance", "recency", "score", "text"]
    for name in columns:
        table.add_column(name, overflow="fold", max_width=48 if name == "text" else None)

    def number(value, digits=3):
        return "-" if value is None else f"{value:.{digits}f}"

    for r in outcome.results:
        s = r.scores
        table.add_row(str(s.get("mmr_rank")), r.id[:8], number(s.get("dense")), number(s.get("bm25")),
                      number(s.get("rrf"), 4), number(s.get("fused")), number(s.get("match")), number(s.get("logit")),
                      *([number(s.get("speaker"))] if spoke else []), *([number(s.get("asking"))] if asks else []),
                      number(s.get("session")),
                      *([number(s.get("time"))] if asked else []),
                      *([str(s.get("part") or "-")] if parts else []), number(s.get("relevance")),
                      number(s.get("recency")), number(s.get("score")),
                      escape(" ".join(r.text.split()) + (f" {r.earlier}" if r.superseded else "")))  # a [secret: ...] placeholder is text, not rich markup
    extra = sum(map(bool, (spoke, asks, asked, parts)))  # each optional column gets room, not the others' folds
    console = Console(width=max(120 + 9 * extra, Console().width))
    console.print(table)
    stage = "reranker: ran" if outcome.reranked else f"reranker: did not run ({outcome.rerank_note}); " \
        f"relevance = min-max of fused (dense + BM25) x match; match below {outcome.floor:g} left out"
    # The lines below the table unwrapped (the terminal wraps them): a part's words or a range stay whole.
    console.print(stage, soft_wrap=True)
    console.print("session = what the other memories of the result's session added to its relevance "
                  "(session_weight)", soft_wrap=True)
    if spoke:
        console.print("speaker = what a line said by another speaker than the one the question names lost", soft_wrap=True)
    if asks:
        console.print("asking = what a chat line that asks lost (one that only asks keeps 60% of its relevance, one "
                      "that says something and then asks 70%)", soft_wrap=True)
    if asked is not None:
        named = "; ".join(str(r) for r in asked.ranges)
        console.print("time = what the query's time added to the relevance: " + "; ".join(filter(None, [
            f"memories of {named} (and, as candidates, that range's best matches)" if named else "",
            "a \"when\" question: memories whose words name a time" if asked.asks_when else ""])), soft_wrap=True)
    if parts:
        console.print("part = the part of the question that ranked it (its n-th best takes the question's n-th "
                      "relevance): " + "; ".join(f"{i} {text!r}" for i, text in enumerate(parts, 1)), soft_wrap=True)
    console.print("score = relevance x (1 - recency_weight + recency_weight x recency); an earlier memory "
                  "(something newer took its place) ranks below what replaced it", soft_wrap=True)


@app.command()
def reindex(
    ctx: typer.Context,
    full: bool = typer.Option(False, "--full", help="Rebuild the index from scratch."),
    check: bool = typer.Option(False, "--check", help="Write nothing; list drift; exit 1 if out of date."),
    watch: bool = typer.Option(False, "--watch", help="Keep the index in sync until Ctrl-C (or SIGTERM, SIGHUP)."),
    json_output: bool = json_option("Print the report as JSON."),
) -> None:
    """Sync the index with the files; commit hand edits."""
    _exclusive(ctx, "check", "full", "watch")
    state = _state(ctx)
    if watch:
        _watch(ctx, state)
        return
    as_json = json_output or state.json
    vault = state.open()
    if check:
        report = vault.check()
        for problem in report.skipped:
            info(ctx, f"memvault: skipped {problem}")
        if as_json:
            emit_json(report.to_json())
        else:
            for label, paths in (("added", report.added), ("changed", report.changed), ("removed", report.removed)):
                for path in paths:
                    typer.echo(f"{label:<8} {path}")
            for path, labels in report.unscrubbed.items():
                typer.echo(f"secret   {path}  ({', '.join(labels)}: edited by hand, read by a search as it is; "
                           "`memvault reindex` withholds it and takes the file in)")
            if report.rebuilt:
                typer.echo(f"rebuild  {report.rebuilt}")
            if report.damaged:
                typer.echo(f"damaged  {report.damaged} (`memvault reindex` rebuilds it)")
        raise typer.Exit(0 if report.in_step else 1)  # the answer stats gives
    with term.progress_bar(not state.quiet) as bar:
        report = vault.reindex(full=full, progress=bar)
    for problem in report.skipped:
        _error(f"skipped {problem}")
    for memory in report.adopted:
        info(ctx, f"memvault: adopted {vault.relative(memory.path)} as a note (front matter added)")
    for old, new in report.moved:
        info(ctx, f"memvault: moved {old} to {new} (a memory's place: its conversation's folder for its kind)")
    if as_json:
        emit_json(report.to_json())
    else:
        typer.echo(report.summary())
    if report.skipped:
        raise typer.Exit(1)


def _watch(ctx: typer.Context, state: State) -> None:
    """`reindex --watch`: until a stop signal (docs/design.md, "Stopping a long-running command")."""
    from memvault.store import signals

    signals.stop_on_signals()  # first: a signal while it starts is not lost either
    try:
        vault = state.open()
        told: dict[str, tuple] = {}  # a skipped file is reported once, until it changes

        def on_report(report) -> None:
            now_skipped = {str(problem.path): (problem.reason, _mtime(problem.path)) for problem in report.skipped}
            for path, seen in now_skipped.items():
                if told.get(path) != seen:
                    info(ctx, f"memvault: skipped {path}: {seen[0]}")
            told.clear()
            told.update(now_skipped)
            if report.drift and not state.quiet:
                print(report.summary(), flush=True)

        # A stop ends the watch between two syncs (a sync under way finishes), or a wait for the lock.
        vault.watch(on_report, stop=signals.requested,
                    on_start=lambda: info(ctx, f"memvault: watching {vault.root / 'entries'} (Ctrl-C to stop)"))
    except signals.Stopped:
        pass  # it was waiting for the vault lock: nothing to finish


@app.command()
def clone(
    ctx: typer.Context,
    url: str = typer.Argument(..., metavar="URL", help="The vault's git URL: a bare repository on a server "
                                                       "(ssh://, user@host:path), GitHub or any git host, a folder."),
    path: Optional[Path] = typer.Argument(None, metavar="[PATH]", help="Where to put it: a new or empty folder "
                                                                       "(default: --vault, $MEMVAULT_DIR, else "
                                                                       "~/.local/share/memvault)."),
    json_output: bool = json_option("Print what was cloned as JSON."),
) -> None:
    """Copy a vault from a git remote and build its index (then `memvault sync` keeps both in step)."""
    from memvault.api import clone_vault

    state = _state(ctx)
    with term.stage_progress(not state.quiet) as progress:
        result = clone_vault(url, path if path is not None else state.vault_path, notice=state.notice,
                             progress=progress, **state.overrides)
    if json_output or state.json:
        emit_json(result.to_json())
        return
    data = result.to_json()
    count = data["indexed"]
    typer.echo(f"cloned {data['url']} into {data['path']} ({data['branch'] or 'no branch yet'}): "
               f"{count} memor{'y' if count == 1 else 'ies'} indexed")


@app.command()
def sync(
    ctx: typer.Context,
    remote: Optional[str] = typer.Option(None, "--remote", metavar="NAME",
                                         help="The git remote (default: the branch's upstream, else origin, else "
                                              "the only one)."),
    no_push: bool = typer.Option(False, "--no-push", help="Pull and merge only; push nothing."),
    push_secrets: bool = typer.Option(False, "--push-secrets",
                                      help="Push even when the commits hold what looks like a secret (an API key, "
                                           "a password): it then leaves this machine for the remote and its "
                                           "backups, and must be rotated. Without it, such a push is refused."),
    json_output: bool = json_option("Print what was pulled, pushed, re-indexed and "
                                     "resolved as JSON."),
) -> None:
    """Keep one vault on several machines: commit hand edits, pull, merge, re-index, push.

    A hand edit that does not read as a memory (broken front matter) is left out, named on stderr, and the exit code is 1: it is neither committed nor pushed. Conflicts are settled without conflict markers: a memory edited on two machines keeps the later edit, the other becomes a tombstone beside it; an edit wins over a deletion; a summary or session file takes the newer. A remote that is missing, unreachable, refuses the credentials or rejects the push is one line and exit code 1; nothing is lost, and the next sync finishes the job. Commits that hold a secret (in a file, a path's name or the commit message) are not pushed (exit 1, naming each file and line, or commit): `memvault scrub --rewrite-history` takes them out, --push-secrets pushes them anyway.
    """
    from memvault.errors import RemoteError, SecretsFound, SyncConflict

    state = _state(ctx)
    as_json = json_output or state.json
    vault = state.open()
    try:
        with term.stage_progress(not state.quiet) as progress:
            result = vault.sync(remote, push=not no_push, push_secrets=push_secrets, progress=progress)
    except (RemoteError, SyncConflict) as exc:
        if as_json and exc.result is not None:
            secrets = {"secrets": [f.to_json() for f in exc.findings]} if isinstance(exc, SecretsFound) else {}
            emit_json({**exc.result.to_json(), "error": str(exc), **secrets})
        raise
    if as_json:
        emit_json(result.to_json())
    else:
        for line in sync_lines(result):
            typer.echo(line)
    for line in result.left_out():  # the user must know: what they edited did not leave this machine
        _error(line)
    if result.skipped:
        raise typer.Exit(1)


@app.command()
def scrub(
    ctx: typer.Context,
    rewrite_history: bool = typer.Option(False, "--rewrite-history",
                                         help="Also make the commits not pushed yet again without the secrets "
                                              "(same messages, authors and dates); the old history is kept under "
                                              "refs/memvault/before-scrub/TIME until you delete it. Pushed commits "
                                              "are never rewritten."),
    json_output: bool = json_option("Print what was scrubbed and what git history still holds as JSON."),
) -> None:
    """Replace secrets already in the vault (API keys, tokens, passwords, private keys) with placeholders.

    The memory files, live and deleted, hand edits included, are rewritten with placeholders that name the kind of secret and the last four characters of a key (secret: openai-key …a1b2; nothing of a password) as one commit (log shows it; undo does not take it back); a memory whose conversation id is a token moves to the conversation named by its placeholder; the values go to .memvault/withheld.jsonl, never committed. Then it lists each secret git history still holds, by file and line, path or commit message, and whether it was pushed: --rewrite-history takes them out of the commits not pushed yet; a pushed secret has left this machine and must be rotated. Runs whatever secret_scan says. Exit code 1 while a secret is left anywhere.
    """
    state = _state(ctx)
    vault = state.open()
    result = vault.scrub(rewrite_history=rewrite_history)
    if json_output or state.json:
        emit_json(result.to_json())
    else:
        for line in scrub_lines(result, vault.root):
            typer.echo(line)
    if result.history or result.left:
        raise typer.Exit(1)


def scrub_lines(result, root: Path) -> list[str]:
    """What `scrub` prints: what it replaced, what is left in files and in git history, and what to do."""
    lines = []
    count = sum(len(w.labels) for w in result.scrubbed)
    if count:
        commit = f" (commit {result.commit[:8]})" if result.commit else ""
        lines.append(f"scrubbed {count} secret{'s' if count != 1 else ''} in {len(result.scrubbed)} "
                     f"memor{'y' if len(result.scrubbed) == 1 else 'ies'}{commit}; the values are only in "
                     f"{root}/.memvault/withheld.jsonl (never committed):")
        lines += [f"  {w.path}  {', '.join(w.labels)}" for w in result.scrubbed]
    if result.left:
        lines.append("left in files that are not memories (edit them yourself):")
        lines += [f"  {f}" for f in result.left]
    if result.rewrite is not None and not result.rewrite.commits:
        lines.append("rewrote no commit: none came out different (what git history still holds is below); HEAD and "
                     "the branch are as they were")
    elif result.rewrite is not None:
        r = result.rewrite
        lines.append(f"rewrote {r.commits} commit{'s' if r.commits != 1 else ''} not pushed yet ({r.cleaned} file "
                     f"version{'s' if r.cleaned != 1 else ''} cleaned); the old history is under {r.backup_ref}: to "
                     f"drop it for good, git -C {root} update-ref -d {r.backup_ref} && git -C {root} reflog expire "
                     f"--expire=now --all && git -C {root} gc --prune=now")
    if result.unpushed:
        lines.append(f"git history still holds {len(result.unpushed)} in commits not pushed yet:")
        lines += [f"  {f}" for f in result.unpushed]
        lines.append("  `memvault scrub --rewrite-history` takes them out of those commits (they have not left "
                     "this machine)")
    if result.pushed:
        lines.append(f"git history holds {len(result.pushed)} in commits already pushed:")
        lines += [f"  {f}" for f in result.pushed]
        lines.append("  those have left this machine: rotate them with their provider; memvault does not rewrite "
                     "pushed commits (every machine and the remote hold them, and the next sync would merge them back)")
    if not (count or result.left or result.history or result.rewrite):
        lines.append("no secrets found in the memory files or in git history")
    return lines


def sync_lines(result) -> list[str]:
    """What `sync` prints: what it committed, pulled, settled, re-indexed and pushed."""
    where = f"{result.remote}/{result.remote_branch}"
    lines = []
    if result.hand_edits:
        lines.append(f"committed {len(result.hand_edits)} hand edit{'s' if len(result.hand_edits) != 1 else ''}")
    if result.integration == "up to date":
        lines.append(f"nothing to pull from {where}")
    elif result.integration == "resumed":
        lines.append(f"finished an interrupted sync: {len(result.pulled)} files")
    else:
        commits = f"{result.pulled_commits} commit{'s' if result.pulled_commits != 1 else ''}"
        lines.append(f"pulled {commits} from {where}: {len(result.pulled)} file{'s' if len(result.pulled) != 1 else ''} "
                     f"({result.integration})")
    for r in result.resolved:
        kept = "kept this machine's version" if r.kept == "ours" else "kept the remote's version"
        other = f"; the other version is the tombstone {r.sibling}" if r.sibling else ""
        lines.append(f"resolved {r.path}: {r.case}: {kept}{other}")
    report = result.reindexed
    if report is not None and report.drift:
        lines.append(f"re-indexed: {len(report.added)} added, {len(report.changed)} changed, "
                     f"{len(report.removed)} removed")
    if result.pushed:
        lines.append(f"pushed {result.pushed_commits} commit{'s' if result.pushed_commits != 1 else ''} to {where}")
    return lines


@app.command()
def models(
    ctx: typer.Context,
    download: bool = typer.Option(False, "--download", help="Fetch the configured models into fastembed's cache "
                                                             "(the only command that downloads)."),
    json_output: bool = json_option("Print the status as JSON."),
) -> None:
    """Show the embedding model and reranker in use; --download fetches them."""
    state = _state(ctx)
    status = state.open().models(download=download).to_json()
    if json_output or state.json:
        emit_json(status)
    else:
        for key, value in status.items():
            mark = "ok" if value["available"] else "missing"
            detail = f"  {value['dim']}-d" if value.get("dim") else ""
            typer.echo(f"{key:<16} {value['name']}  {mark}{detail}")
            if not value["available"] and key != "embedding_model" and value.get("error"):
                info(ctx, f"  {value['error']}")
    if not status["embedding_model"]["available"]:
        _error(status["embedding_model"]["error"])  # an error: shown even with -q
        raise typer.Exit(1)
    if download and not status["reranker_model"]["available"]:
        _error(f"could not download {status['reranker_model']['name']}: {status['reranker_model'].get('error')}")
        raise typer.Exit(1)


class Style(str, Enum):
    conversation = "conversation"
    journal = "journal"
    document = "document"


@app.command()
@takes(CHAT)
def chat(
    ctx: typer.Context,
    asked: dict,
    message: Optional[list[str]] = typer.Argument(None, help="The message; none reads stdin (or starts an "
                                                            "interactive chat on a terminal)."),
    context: bool = typer.Option(False, "--context", help="Show the session: turns, tokens, idle time, summary."),
    clear: bool = typer.Option(False, "--clear", help="Start a fresh session."),
    json_output: bool = json_option("One-shot: reply, memories used, facts learned as JSON."),
) -> None:
    """Chat with an LLM that remembers: retrieve, answer, learn.

    After the reply, up to 3 facts about you are taken from what you state (never from a question); an older fact one of them makes untrue is moved under deleted/ (replaced_by names the new one). Each change is one line on stderr.
    """
    state = _state(ctx)
    as_json = json_output or state.json
    vault = state.open()
    stream = asked.pop("stream", True)
    conversation, now = asked.setdefault("conversation", "global"), asked.get("now")
    if context:
        _show_context(ctx, vault.session(conversation, now), as_json)
        return
    if clear:
        vault.clear_session(conversation, now)
        info(ctx, f"memvault: new session for {conversation}")
        if not message:
            return
    options = asked
    text = " ".join(message) if message else None
    if text is None and sys.stdin is not None and sys.stdin.isatty():
        if as_json:
            raise UsageError("--json needs a MESSAGE (or stdin)")
        _interactive(ctx, vault, options, stream=stream)
        return
    if text is None:
        text = _read_stdin(ctx)
    _one_turn(ctx, vault, text, options, stream=stream and not as_json, as_json=as_json)


def _one_turn(ctx, vault, text: str, options: dict, stream: bool, as_json: bool) -> None:
    turn = vault.chat(text, stream=stream, **options)
    try:
        for piece in turn:
            if not as_json:
                sys.stdout.write(piece)
                sys.stdout.flush()
    except KeyboardInterrupt:
        turn.close()  # what arrived is kept, marked partial
        raise
    if not as_json:
        sys.stdout.write("\n")
        sys.stdout.flush()
    result = turn.finish()
    if as_json:
        emit_json(result.to_json())
    if result.upkeep_error:
        info(ctx, f"memvault: warning: reply kept, but memory upkeep failed: {result.upkeep_error}")
    elif result.learned and not as_json:
        for line in change_lines(result.learned.to_json()):
            info(ctx, f"memvault: {line}")
    if not as_json:
        for closed in result.episodes:  # what closed before this exchange, and what it taught
            info(ctx, episode_line(closed))
            for line in change_lines(closed.learned.to_json() if closed.learned else []):
                info(ctx, f"memvault: {line}")


def _interactive(ctx, vault, options: dict, stream: bool) -> None:
    conversation = options["conversation"]
    info(ctx, f"memvault chat ({conversation}); /help lists the commands, an empty line or Ctrl-D ends it")
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            sys.stderr.write("\n")
            return
        if not line.strip():
            return
        try:
            if line.startswith("/"):
                if _slash_command(ctx, vault, line.strip(), options) == "quit":
                    return
                continue
            _one_turn(ctx, vault, line, options, stream=stream, as_json=False)
        except MemvaultError as exc:
            _error(str(exc))


CHAT_COMMANDS = {
    "/help": "this list",
    "/context": "the session: turns, tokens, idle time, summary",
    "/clear": "start a fresh session (memories still apply)",
    "/search QUERY": "search the memories (the conversation plus global)",
    "/quit": "end the chat (so does an empty line or Ctrl-D)",
}


def _slash_command(ctx, vault, line: str, options: dict) -> str | None:
    """The interactive chat's own commands: never sent to the model."""
    name, _, argument = line.partition(" ")
    conversation = options["conversation"]
    if name in ("/quit", "/exit", "/q"):
        return "quit"
    if name == "/help":
        width = max(map(len, CHAT_COMMANDS))
        for command, what in CHAT_COMMANDS.items():
            sys.stderr.write(f"  {command:<{width}}  {what}\n")
    elif name == "/context":
        _show_context(ctx, vault.session(conversation, options.get("now")), as_json=False)
    elif name == "/clear":
        vault.clear_session(conversation, options.get("now"))
        info(ctx, f"memvault: new session for {conversation}")
    elif name == "/search":
        if not argument.strip():
            raise UsageError("/search needs a QUERY")
        for r in vault.search(argument, conversation=conversation, now=options.get("now")).results:
            typer.echo(f"{r.score:.3f}  {r.id[:8]}  [{r.role}] {' '.join(r.text.split())}")
    else:
        raise UsageError(f"unknown command {name} (/help lists them; start a message with a space to send it as is)")
    return None


def _show_context(ctx, view, as_json: bool) -> None:
    if as_json:
        emit_json(view.to_json())
        return
    idle_text = "no turns yet" if view.idle_seconds is None else f"idle {view.idle_seconds // 60} min"
    typer.echo(f"conversation {view.conversation}: {len(view.turns)} turns, ~{view.tokens} tokens "
               f"(ceiling {view.max_tokens}), {idle_text}"
               + (f"; next message starts a fresh session ({view.fresh_reason})" if view.fresh_reason else ""))
    if view.session_summary:
        typer.echo(f"session summary: {view.session_summary}")
    for t in view.turns:
        typer.echo(f"{t.created_at:%Y-%m-%d %H:%M}  {t.role:<9} {' '.join(t.text.split())[:100]}")
    for t in view.unanswered:
        typer.echo(f"{t.created_at:%Y-%m-%d %H:%M}  unanswered {' '.join(t.text.split())[:100]}  "
                   "(left out of the chat)")
    if view.summary:
        typer.echo(f"conversation summary: {view.summary}")


@app.command()
def reconcile(
    ctx: typer.Context,
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation to consolidate.",
                                      autocompletion=complete_conversation),
    all_conversations: bool = typer.Option(False, "--all", help="Every conversation."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    json_output: bool = json_option("Print the plan as JSON."),
) -> None:
    """Consolidate near-duplicate and contradicting facts with the LLM."""
    _exclusive(ctx, "all_conversations", "conversation")
    state = _state(ctx)
    outcome = state.open().reconcile(conversation, all_conversations=all_conversations, dry_run=dry_run)
    if json_output or state.json:
        emit_json(outcome.to_json())
        return
    if not outcome.plans:
        typer.echo("no near-duplicate or conflicting facts found")
        return
    for plan in outcome.plans:
        typer.echo(f"cluster around {plan.newest.id[:8]}  {plan.newest.first_line()}")
        for step in plan.steps:
            what = {"DELETE": f"-> replaced by {step.replacement[:8]}" if step.replacement else "",
                    "UPDATE": f"-> {step.replacement}", "KEEP": ""}[step.decision]
            typer.echo(f"  {step.decision:<6} {step.memory.id[:8]}  {step.memory.first_line()}  {what}".rstrip())
    changed = sum(1 for s in outcome.steps if s.decision != "KEEP")
    info(ctx, f"memvault: {'would change' if dry_run else 'changed'} {changed} of {len(outcome.steps)} older facts")


@app.command()
@takes(REVIEW)
def review(
    ctx: typer.Context,
    asked: dict,
    memory_ids: Optional[list[str]] = typer.Argument(None, metavar="ID", help="With --keep or --reject: the "
                                                     "learned facts (id or unique prefix).",
                                                     autocompletion=complete_live_memory_id),
    keep: bool = typer.Option(False, "--keep", help="Keep these learned facts: a waiting one goes live, a proposal "
                                                   "retires the facts of yours it names."),
    reject: bool = typer.Option(False, "--reject", help="Reject these learned facts: soft-deleted (reason rejected); "
                                                       "what they retired comes back."),
    text: Optional[str] = typer.Option(None, "--text", help="With --keep and one ID: keep it with these words."),
    reason: Optional[str] = typer.Option(None, "--reason", help="With --reject: why, kept with the rejected fact."),
    json_output: bool = json_option("Print the list, or what was done, as JSON."),
) -> None:
    """Look over what memvault learned: learned facts and proposals not yet reviewed, newest first.

    Each shows the message it came from and what it would replace. On a terminal, one at a time: keep, edit, reject, skip or quit (like `git add -p`); else a list. A learned fact never retires a fact you added by itself: it proposes it, and your fact stays until you keep the proposal. With learned_review = true every learned fact waits here, unused, until kept.
    """
    _exclusive(ctx, "keep", "reject")
    state = _state(ctx)
    as_json = json_output or state.json
    vault = state.open()
    if keep or reject or memory_ids or text is not None or reason is not None:  # the rules are the library's
        outcome = vault.review_decide(keep=memory_ids or () if keep else (), reject=memory_ids or () if reject else (),
                                      text=text, reason=reason)
        if as_json:
            emit_json(outcome.to_json())
        else:
            for line in change_lines([e.to_json() for e in outcome.events]):
                typer.echo(line)
        return
    items = vault.review(**asked)
    if as_json:
        emit_json([item.to_json(vault.root) for item in items])
        return
    if not items:
        info(ctx, "memvault: nothing to review")
        return
    if term.is_terminal(sys.stdin) and term.is_terminal(sys.stderr):
        _review_one_at_a_time(ctx, vault, items)
        return
    for item in items:
        typer.echo("\n".join(review_lines(item)))


def review_lines(item) -> list[str]:
    """One learned fact to review, as a few lines: status, id, text, where from, what it replaces."""
    memory = item.memory
    lines = [f"{item.status:<9} {memory.id[:8]}  {' '.join(memory.text.split())}  "
             f"({memory.conversation_id}, {memory.created_at:%Y-%m-%d %H:%M})"]
    if item.said:
        said = " ".join(item.said.split())
        lines.append(f"          from: \"{said[:200]}{'…' if len(said) > 200 else ''}\"")
    for other in item.would_replace:
        lines.append(f"          would replace {other.id[:8]}  {' '.join(other.text.split())}")
    for other in item.replaced:
        lines.append(f"          replaced {other.id[:8]}  {' '.join(other.text.split())}")
    return lines


REVIEW_KEYS = {"k": "keep it", "e": "edit its words, then keep it", "r": "reject it (what it replaced comes back)",
               "s": "skip it (it stays in review)", "q": "quit (what was done stays done)", "?": "this help"}


def _review_one_at_a_time(ctx, vault, items) -> None:
    """The terminal review, like `git add -p`: each fact, then one key and Enter."""
    done = {"kept": 0, "rejected": 0, "skipped": 0}
    for number, item in enumerate(items, 1):
        sys.stderr.write(f"\n[{number}/{len(items)}] " + "\n".join(review_lines(item)) + "\n")
        while True:
            sys.stderr.write("Keep this fact [k,e,r,s,q,?]? ")
            sys.stderr.flush()
            answer = sys.stdin.readline()
            if not answer:
                answer = "q"
            key = answer.strip().lower()[:1]
            if key == "?" or key not in REVIEW_KEYS:
                for letter, what in REVIEW_KEYS.items():
                    sys.stderr.write(f"  {letter} - {what}\n")
                continue
            break
        if key == "q":
            break
        if key == "s":
            done["skipped"] += 1
            continue
        try:
            if key == "r":
                outcome = vault.review_reject([item.memory.id])
                done["rejected"] += 1
            else:
                text = None
                if key == "e":
                    sys.stderr.write("New words (empty: as they are): ")
                    sys.stderr.flush()
                    text = sys.stdin.readline().strip() or None
                outcome = vault.review_keep([item.memory.id], text=text)
                done["kept"] += 1
        except MemvaultError as exc:
            _error(str(exc))
            continue
        for line in change_lines([e.to_json() for e in outcome.events]):
            info(ctx, f"memvault: {line}")
    info(ctx, f"memvault: kept {done['kept']}, rejected {done['rejected']}, skipped {done['skipped']}")


@app.command()
def learn(
    ctx: typer.Context,
    conversation: Optional[str] = typer.Option(None, "-c", "--conversation", autocompletion=complete_conversation,
                                               help="Only this conversation (default: every one)."),
    since: Optional[str] = typer.Option(None, "--since", metavar="ISO", help="Only turns said at or after this."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the turns that would be learned from; no model."),
    json_output: bool = json_option("Print what was found and done as JSON."),
) -> None:
    """Learn from the chat turns that were never learned from: a server stopped before its upkeep, a reply cut short, an LLM that was down.

    Each chat turn records whether it has been learned from; `serve` and `mcp` catch up at every start too. Each change is shown, as after a chat. An LLM that is down stops it (exit 1); what is left waits for the next run.
    """
    state = _state(ctx)
    as_json = json_output or state.json
    vault = state.open()
    with term.progress_bar(not state.quiet and not dry_run, label="learning", minimum=2) as bar:
        outcome = vault.learn(conversation, since=since, dry_run=dry_run, progress=bar)
    if as_json:
        emit_json(outcome.to_json())
    elif dry_run:
        for turn in outcome.turns:
            typer.echo(f"{turn.id[:8]}  {turn.created_at:%Y-%m-%d %H:%M}  {turn.conversation_id:<12} "
                       f"{' '.join(turn.text.split())[:100]}")
        info(ctx, f"memvault: would learn from {len(outcome.turns)} turn(s)")
    else:
        for line in change_lines(outcome.learned.to_json()):
            typer.echo(line)
        info(ctx, f"memvault: learned from {outcome.done} of {len(outcome.turns)} turn(s) still owed learning")
    if outcome.error:
        _error(outcome.error)
        raise typer.Exit(1)


@app.command()
def episodes(
    ctx: typer.Context,
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation whose episodes to list.",
                                      autocompletion=complete_conversation),
    close: bool = typer.Option(False, "--close", help="Close the open episode too (write it, learn from it)."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Cut the turns into episodes again; the old episode "
                                                          "files are soft-deleted with replaced_by."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show where the turns would be cut; no model, no writes."),
    now: Optional[str] = typer.Option(None, "--now", metavar="ISO", help="Clock override (scripts, tests)."),
    json_output: bool = json_option("Print the episodes and what was done as JSON."),
) -> None:
    """List a conversation's episodes: what happened, in order, each a title and a short narrative.

    Episodes that have closed since (a silence over soft_decay_minutes, chat --clear, a change of
    topic) are written first; with extraction_mode = predict-calibrate, facts are learned from them.
    """
    state = _state(ctx)
    vault = state.open()
    outcome = vault.episodes(conversation, close=close, rebuild=rebuild, dry_run=dry_run, now=now)
    if json_output or state.json:
        emit_json(outcome.to_json(vault.root))
        return
    written = {c.episode.id for c in outcome.closed} | {e.id for e in (outcome.rebuilt.written if outcome.rebuilt else [])}
    for episode in outcome.episodes:
        meta = episode.extra
        mark = "+" if episode.id in written else " "
        typer.echo(f"{mark} {str(meta.get('started_at'))[:16].replace('T', ' ')}  {episode.id[:8]}  "
                   f"{meta.get('title')}  ({len(meta.get('turn_ids') or [])} turns, {meta.get('boundary')})")
        if state.verbose:
            typer.echo(f"    {' '.join(episode.text.split())}")
    if outcome.rebuilt and dry_run:
        info(ctx, f"memvault: --rebuild would cut the {sum(len(s.turns) for s in outcome.rebuilt.segments)} "
                  f"covered turns into {len(outcome.rebuilt.segments)} episodes")
    elif outcome.rebuilt and outcome.rebuilt.replaced:
        info(ctx, f"memvault: {len(outcome.rebuilt.replaced)} episodes replaced by {len(outcome.rebuilt.written)}")
    for segment in outcome.pending:
        when = f"{segment.started_at:%Y-%m-%d %H:%M} - {segment.ended_at:%H:%M}"
        state_word = f"would close ({segment.boundary})" if segment.boundary else "open"
        info(ctx, f"memvault: {len(segment.turns)} turns {when}: {state_word}")
    for closed in outcome.closed:
        if closed.learned:
            for line in change_lines(closed.learned.to_json()):
                info(ctx, f"memvault: {line}")
    if not outcome.episodes and not outcome.pending:
        info(ctx, f"memvault: no episodes in {conversation} yet")


@app.command()
def summarize(
    ctx: typer.Context,
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation to summarize.",
                                      autocompletion=complete_conversation),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild from all entries, depth chosen by size."),
    style: Style = typer.Option(Style.conversation, "--style", help="Prompt variant for the kind of content."),
    print_summary: bool = typer.Option(False, "--print", help="Write the summary to stdout."),
    json_output: bool = json_option("Print the outcome as JSON."),
) -> None:
    """Update the rolling summary, or --rebuild it from every entry."""
    state = _state(ctx)
    vault = state.open()
    outcome = vault.summarize(conversation, rebuild=rebuild, style=style.value)
    if json_output or state.json:
        emit_json(outcome.to_json())
        return
    text = outcome.text
    if outcome.kind in ("none", "unchanged"):
        why = (f"{outcome.input_tokens} tokens in {conversation}: too little to summarize" if outcome.kind == "none"
               else f"nothing new in {conversation} since the summary was written")
        current = vault.summary(conversation)
        text = current.text if current else ""
        info(ctx, f"memvault: {why}" + ("; the summary is as it was" if text and print_summary else ""))
    else:
        levels = ", ".join(f"{k}: {v}" for k, v in outcome.levels.items())
        info(ctx, f"memvault: {outcome.kind} summary, {outcome.input_tokens} -> {outcome.output_tokens} tokens"
                  + (f" ({levels})" if levels else ""))
    if print_summary and text:
        typer.echo(text)


class ImportSource(str, Enum):
    chatgpt = "chatgpt"
    claude = "claude"
    markdown = "markdown"
    jsonl = "jsonl"


@app.command("import")
def import_(
    ctx: typer.Context,
    source: ImportSource = typer.Argument(..., metavar="SOURCE",
                                          help="chatgpt or claude (the conversations.json of a data export), "
                                               "markdown (a folder of .md notes) or jsonl (a memvault export)."),
    path: Path = typer.Argument(..., metavar="PATH", help="The file to read (a folder for markdown)."),
    conversation_prefix: str = typer.Option("", "--conversation-prefix", metavar="P",
                                            help="Put P before every imported conversation id (e.g. chatgpt-)."),
    extract: bool = typer.Option(False, "--extract", help="Then learn facts from the user turns with the LLM "
                                                          "(resumable: run it again to go on)."),
    since: Optional[str] = typer.Option(None, "--since", metavar="ISO", help="Only what was said or written at or "
                                                                              "after this date."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be imported; write nothing."),
    json_output: bool = json_option("Print the outcome as JSON."),
) -> None:
    """Bring in a ChatGPT or Claude history, a folder of markdown notes, or a memvault export.

    What is there already (by original id) is skipped, so running the same import again adds only what is new. One commit. Anything left out is one line on stderr, and the exit code is 1.
    """
    state = _state(ctx)
    try:
        with term.stage_progress(not state.quiet) as progress:
            result = state.open().import_from(source.value, path, conversation_prefix=conversation_prefix,
                                              extract=extract, since=since, dry_run=dry_run, progress=progress)
    except KeyboardInterrupt:
        _error("interrupted; what was done is committed: run the same command again to go on")
        raise typer.Exit(130) from None
    for problem in result.problems:
        _error(str(problem) if problem.fatal else f"skipped {problem}")
    if json_output or state.json:
        emit_json(result.to_json())
    else:
        _print_import(ctx, result)
    if result.extraction and result.extraction.error:
        _error(f"learning stopped: {result.extraction.error}")
    if not result.complete:
        raise typer.Exit(1)


def _print_import(ctx, result) -> None:
    would = "would add" if result.dry_run else "added"
    for row in result.conversations:
        if row.added:
            there = f" ({row.already} there already)" if row.already else ""
            typer.echo(f"+{row.added:<5} {row.conversation_id}  {row.title}{there}")
    left = f", {len(result.problems)} left out" if result.problems else ""
    older = f", {result.older} older than --since" if result.older else ""
    for path, source in result.kept:
        info(ctx, f"memvault: kept {path}: {source} changed since it was imported, here too; the vault's "
                  "version stays")
    if result.updated:
        count = result.updated
        commit = f" (commit {result.commit[:8]})" if result.commit and not result.added else ""
        typer.echo(f"{'would update' if result.dry_run else 'updated'} {count} note{'s' if count != 1 else ''} "
                   f"changed at {'its' if count == 1 else 'their'} source{commit}")
    if result.added:
        conversations = sum(1 for row in result.conversations if row.added)
        commit = f" (commit {result.commit[:8]})" if result.commit else ""
        typer.echo(f"{would} {result.added} memories in {conversations} conversation"
                   f"{'' if conversations == 1 else 's'}{commit}; {result.already} there already{older}{left}")
    elif result.updated:
        pass
    elif result.already or result.older:
        typer.echo(f"nothing new: {result.already} memories there already{older}{left}")
    else:
        typer.echo(f"nothing imported{left}")
    extraction = result.extraction
    if extraction is not None:
        if result.dry_run:
            typer.echo(f"would learn from {extraction.turns - extraction.before} user turns "
                       f"({extraction.before} learned from before)")
            return
        for line in change_lines(extraction.learned.to_json() if extraction.learned else []):
            typer.echo(line)
        typer.echo(f"learned from {extraction.done} of {extraction.turns - extraction.before} user turns "
                   f"({extraction.before} before)")


class ExportFormat(str, Enum):
    jsonl = "jsonl"
    markdown = "markdown"


@app.command()
def export(
    ctx: typer.Context,
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation to export.",
                                     autocompletion=complete_conversation),
    all_conversations: bool = typer.Option(False, "--all", help="Every conversation."),
    include_deleted: bool = typer.Option(False, "--include-deleted", help="Deleted and replaced memories too."),
    since: Optional[str] = typer.Option(None, "--since", metavar="ISO", help="Only memories created at or after."),
    output_format: ExportFormat = typer.Option(ExportFormat.jsonl, "--format",
                                               help="jsonl (every front-matter key and the text; what import "
                                                    "jsonl reads) or markdown (a digest per conversation)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="PATH",
                                          help="Write to this file (whole or not at all) instead of stdout."),
    json_output: bool = json_option("With --output: print what was written as JSON."),
) -> None:
    """Take memories out: JSON lines for another vault or tool, or a markdown digest to read."""
    _exclusive(ctx, "all_conversations", "conversation")
    state = _state(ctx)
    as_json = json_output or state.json
    if as_json and output is None and output_format == ExportFormat.markdown:
        raise UsageError("--json with --format markdown needs --output (stdout would not be JSON)")
    vault = state.open()
    result = vault.export(output if output is not None else sys.stdout, conversation=conversation,
                          all_conversations=all_conversations, include_deleted=include_deleted, since=since,
                          format=output_format.value)
    for problem in result.skipped:
        _error(f"skipped {problem}")
    if output is not None:
        if as_json:
            emit_json(result.to_json())
        else:
            info(ctx, f"memvault: {result.memories} memories of {result.conversations} conversation"
                      f"{'' if result.conversations == 1 else 's'} written to {result.output}")
    if result.skipped:
        raise typer.Exit(1)


@app.command()
def mcp(ctx: typer.Context) -> None:
    """Serve the vault to AI agents over MCP (stdio): search, add, get, delete, recent, history, summary.

    Speaks the Model Context Protocol on stdin and stdout until the client closes stdin (or SIGTERM,
    SIGHUP, Ctrl-C); notices go to stderr. Register it with an agent, e.g.
    `claude mcp add memvault -- memvault mcp`.
    """
    from memvault.faces.lifecycle import LongLived
    from memvault.store import signals

    signals.stop_on_signals()  # first: a signal while it starts is not lost (run_stdio takes over later)
    state = _state(ctx)
    try:
        life = LongLived.open(state.open, "mcp", state.notice)  # stop signals first, then the vault
        try:
            from memvault.faces.mcp_server import run_stdio  # the SDK loads here: `memvault --help` stays fast

            run_stdio(life)
        finally:
            life.vault.close()
    except signals.Stopped:
        pass  # before it served: nothing under way
    # The client has left and every call has finished (the server waits for them). A client kills a
    # server that is not gone 2 s after it closed stdin, and the native libraries' teardown (ONNX
    # Runtime, LanceDB) alone can take that long on a busy machine: leave at once.
    sys.stderr.flush()
    os._exit(0)


@app.command()
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; any other than a loopback one "
                                                          "needs MEMVAULT_SERVE_API_KEY."),
    port: int = typer.Option(8100, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
    conversation: str = typer.Option("global", "-c", "--conversation", autocompletion=complete_conversation,
                                     help="Conversation of the requests that name none."),
    max_body_mb: float = typer.Option(8.0, "--max-body-mb", min=0.001, help="Largest request body, in MB (413 above)."),
) -> None:
    """Serve the vault as a memory proxy for OpenAI and Anthropic clients, and a memory API.

    Point any OpenAI client's base URL at http://HOST:PORT/v1: each chat request gets the memories
    that fit its user message, is answered by the configured LLM (llm_model, llm_base_url), with
    whatever else the client sent (tools, usage, ...) passed through, and its text is stored; facts
    are learned after the response. Claude Code and other Anthropic clients: ANTHROPIC_BASE_URL=
    http://HOST:PORT; POST /v1/messages goes to anthropic_base_url as sent, the memories one more
    system block (anthropic_upstream = litellm: to llm_model instead, translated by litellm). Also /v1/models, /health and /v1/memories (list, add, search, get, delete). Stops
    cleanly on SIGTERM, SIGHUP or Ctrl-C.
    """
    from memvault.store import signals

    signals.stop_on_signals()  # first: a signal while it starts is not lost (run() takes over later)
    _serve(_state(ctx), host, port, conversation, max_body_mb)


def _serve(state, host: str, port: int, conversation: str, max_body_mb: float, on_check=None) -> None:
    """`memvault serve` (and `memvault ui` when none runs): on_check(vault) once the bind is allowed."""
    from memvault.faces.lifecycle import LongLived
    from memvault.store import signals
    from memvault.store.files import check_conversation_id

    try:
        from memvault.faces.serve import ServeOptions, check_bind, run  # FastAPI and uvicorn load here, not at --help

        check_conversation_id(conversation)
        api_key = state.open().settings.serve_api_key  # the settings alone: a refusal creates and watches nothing
        check_bind(host, api_key)
        if on_check is not None:
            on_check()
        life = LongLived.open(state.open, "serve", state.notice)  # stop signals first, then the vault
        run(life, ServeOptions(host=host, port=port, conversation=conversation,
                               max_body=int(max_body_mb * 1024 * 1024), api_key=api_key, access_log=state.verbose))
    except signals.Stopped:
        state.notice("memvault serve: stopped before it served anything")
        sys.stderr.flush()
        os._exit(0)  # as run() leaves: the native libraries' teardown is not waited for


class CodingAgent(str, Enum):
    claude_code = "claude-code"
    codex = "codex"
    gemini = "gemini"


def _vault_root(state: State) -> Path:
    from memvault.store.config import default_vault_path

    return Path(os.path.abspath(state.vault_path if state.vault_path is not None else default_vault_path()))


@app.command()
def hook(
    ctx: typer.Context,
    agent: CodingAgent = typer.Argument(..., help="The coding agent whose hook event is on stdin."),
) -> None:
    """Answer one hook event of a coding agent (its JSON on stdin): what the session should know at its
    start, the memories that fit a prompt, the exchange stored when a turn ends, the session closed as an
    episode when it ends. Set up by `memvault setup AGENT`.

    Never in the agent's way: exit 0 whatever happens, stdout only the hook's JSON (or nothing), a failure
    one line in .memvault/hook.log, at most hook_timeout seconds for the events the agent waits for; the
    vault's agent (started for it unless the agent setting is off) keeps it fast.
    """
    from memvault.faces import hooks

    state = _state(ctx)
    raw = sys.stdin.buffer.read() if sys.stdin is not None else b""
    _leave(hooks.run(agent.value, raw, _vault_root(state), lambda **notice: _open_with(state, **notice)))


def _leave(code: int) -> None:
    """End a hook's process at once, its answer written: the coding agent waits for the process to exit,
    and ONNX Runtime's and LanceDB's teardown alone can take seconds (as `mcp` leaves). In the vault's
    agent, the command just ends."""
    from memvault.faces.agent import in_agent

    if in_agent():
        raise typer.Exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _open_with(state: State, notice) -> Any:
    from memvault.api import open_vault

    return open_vault(state.vault_path, notice=notice, **state.overrides)


@app.command("hook-upkeep", hidden=True)
def hook_upkeep(ctx: typer.Context) -> None:
    """The learning and episode closing hooks queued (started by `memvault hook`, in the background)."""
    from memvault.faces import hooks

    state = _state(ctx)
    _leave(hooks.upkeep(_vault_root(state), lambda **notice: _open_with(state, **notice)))


class Scope(str, Enum):
    user = "user"
    project = "project"


@app.command()
def setup(
    ctx: typer.Context,
    agent: CodingAgent = typer.Argument(..., help="The coding agent to set up."),
    scope: Scope = typer.Option(Scope.user, "--scope", help="user: the agent's settings in your home folder, for "
                                                             "every project; project: the project's own settings "
                                                             "(the git root of the current folder)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the change as a diff; write nothing."),
    remove: bool = typer.Option(False, "--remove", help="Take memvault's hooks and MCP server out again, and "
                                                        "nothing else."),
    json_output: bool = json_option("Print what was (or would be) changed as JSON."),
) -> None:
    """Give a coding agent memvault's memory: its hooks (`memvault hook AGENT` at a session's start, at each
    prompt, when a turn ends, at compaction and at the session's end) and `memvault mcp`, merged into the
    agent's own settings file.

    The user's own hooks and settings are kept; a second run changes nothing; the file as it was is kept
    beside it (FILE.memvault.bak) before any change. Claude Code: ~/.claude/settings.json and ~/.claude.json
    (--scope project: .claude/settings.json and .mcp.json); Codex: ~/.codex/hooks.json (MCP: the `codex mcp
    add` command it prints); Gemini CLI: ~/.gemini/settings.json.
    """
    from memvault.api import project_folder
    from memvault.faces import setup as agent_setup

    state = _state(ctx)
    vault_args = ["--vault", str(_vault_root(state))] if state.vault_path is not None or os.environ.get("MEMVAULT_DIR") \
        else []
    plan = agent_setup.plan(agent.value, scope.value, remove, agent_setup.memvault_command(vault_args),
                            project_folder(Path.cwd()), Path.home())
    if not dry_run:
        agent_setup.apply(plan)
    if json_output or state.json:
        emit_json({**plan.to_json(), "dry_run": dry_run})
        return
    for change in plan.files:
        if dry_run and change.changed:
            typer.echo(change.diff(), nl=False)
        verb = ("would change" if dry_run else "changed") if change.changed else "unchanged"
        backup = f" (the old one kept as {agent_setup.backup_path(change.path).name})" \
            if change.changed and change.before is not None and not dry_run else ""
        info(ctx, f"memvault: {change.path}: {verb}: {'; '.join(change.said)}{backup}")
    for note in plan.notes:
        info(ctx, f"memvault: {note}")
@app.command()
def ui(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address for the serve it starts; any other than a "
                                                          "loopback one needs MEMVAULT_SERVE_API_KEY."),
    port: int = typer.Option(8100, "--port", min=0, max=65535,
                             help="Port for the serve it starts (taken: any free one)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Print the page's address only."),
) -> None:
    """Open the vault's page in your browser: the timeline, search, one memory with its history, review,
    edit, remove, undo, conversations.

    The page is served by `memvault serve` at http://HOST:PORT/. When one already runs for this vault,
    its page is opened and the command ends; else serve starts here, in the foreground (stop it with
    Ctrl-C), and the page opens once it answers. The address is printed either way ($BROWSER picks the
    browser).
    """
    from memvault.faces import ui as page_ui
    from memvault.store import signals

    signals.stop_on_signals()
    state = _state(ctx)
    say = lambda message: typer.echo(message)  # noqa: E731  (stdout: the address is the command's output)
    root = state.open().root
    url = page_ui.running(root)
    if url is not None:
        page_ui.open_page(url, say, browser=not no_browser)
        return
    port = page_ui.free_port(host, port)
    url = page_ui.page_url(host, port)

    def started() -> None:
        say(f"memvault ui: starting memvault serve for {root}; the page will be at {url} (Ctrl-C stops it)")
        page_ui.open_when_ready(url, say, browser=not no_browser)

    _serve(state, host, port, "global", 8.0, on_check=started)


class AgentAction(str, Enum):
    start = "start"
    status = "status"
    stop = "stop"


@app.command()
def agent(
    ctx: typer.Context,
    action: Optional[AgentAction] = typer.Argument(None, help="start (in the background), status or stop; "
                                                              "none: run in the foreground."),
    idle: Optional[float] = typer.Option(None, "--idle", metavar="MINUTES", min=0.01,
                                         help="Exit after this long without a command (default: the "
                                              "agent_idle_minutes setting, 10)."),
    json_output: bool = json_option("Print the status as JSON."),
) -> None:
    """Keep the vault warm: a process that carries out this vault's CLI commands (search, add, ls, ...)
    with the model and libraries loaded once, over a Unix socket in .memvault/ (owner-only).

    With the `agent` setting at use (the default) a running one is used; at auto the first command starts
    one in the background; at off, none. Same output and exit codes as without it.
    """
    from memvault.faces import agent as agent_process

    state = _state(ctx)
    vault = state.open()
    minutes = idle if idle is not None else vault.settings.agent_idle_minutes
    sidecar = vault.root / ".memvault"
    if action is None:
        agent_process.run(vault.root, minutes, state.notice, app)
        return
    if action is AgentAction.start:
        status = agent_process.start(vault.root, minutes)
        info(ctx, f"memvault agent: pid {status['pid']} serves {vault.root}")
        return
    if action is AgentAction.stop:
        stopped = agent_process.stop(sidecar)
        info(ctx, f"memvault agent: pid {stopped} stopped" if stopped else f"memvault agent: none runs for {vault.root}")
        return
    status = agent_process.status(sidecar)
    if json_output or state.json:
        emit_json(status or {"running": False, "vault": str(vault.root)})
    elif status:
        for line in agent_process.status_lines(status):
            typer.echo(line)
    else:
        typer.echo(f"no agent runs for {vault.root}")
    if not status:
        raise typer.Exit(1)


def main() -> None:
    """The CLI itself, cold (the `memvault` command starts in warm.py, which may hand the command to
    the vault's agent first)."""
    app(prog_name="memvault")


if __name__ == "__main__":
    main()
