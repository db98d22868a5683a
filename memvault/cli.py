"""The `memvault` command line: a thin layer over the library.

Results go to stdout, everything else to stderr. Heavy modules (lancedb,
fastembed, litellm, git) are imported inside the commands that need them so
that `memvault --help` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from memvault import __version__
from memvault.errors import MemvaultError, UsageError


class MemvaultGroup(TyperGroup):
    """Turns library errors into one line on stderr and the right exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MemvaultError as exc:
            _error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:
            # `memvault log | head`: the reader left; that is not an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(0) from None


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

    def vault(self, **overrides: Any):
        from memvault.config import default_vault_path
        from memvault.vault import Vault

        return Vault.open(self.vault_path or default_vault_path(), {**self.overrides, **overrides})


def _state(ctx: typer.Context) -> State:
    return ctx.find_root().obj


def _error(message: str) -> None:
    sys.stderr.write(f"memvault: error: {message}\n")
    sys.stderr.flush()


def info(ctx: typer.Context, message: str) -> None:
    """Progress and notices: stderr, silenced by -q."""
    if not _state(ctx).quiet:
        sys.stderr.write(message + "\n")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


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
    json_output: bool = typer.Option(False, "--json", help="Machine-readable JSON on stdout."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Only results and errors."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="More detail on stderr."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
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
def add(
    ctx: typer.Context,
    text: Optional[list[str]] = typer.Argument(None, help="Memory text; none or '-' reads stdin."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Read the text from a file."),
    each_line: bool = typer.Option(False, "--each-line", help="One memory per non-empty line (list markers stripped)."),
    jsonl: Optional[str] = typer.Option(
        None, "--jsonl", metavar="FILE|-",
        help="One JSON object per line: text, and optional conversation_id, created_at, kind, tags, "
             "source, rationale, alternatives, meta.",
    ),
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation id."),
    kind: Kind = typer.Option(Kind.fact, "--kind", help="fact (role memory), note or decision."),
    tag: Optional[list[str]] = typer.Option(None, "--tag", "-t", help="Tag (repeatable)."),
    source: Optional[str] = typer.Option(None, "--source", help="Where the memory comes from (URL, file, book)."),
    rationale: Optional[str] = typer.Option(None, "--rationale", help="Why (for decisions)."),
    alternative: Optional[list[str]] = typer.Option(None, "--alternative", help="An alternative considered (repeatable)."),
    json_output: bool = typer.Option(False, "--json", help="Print the stored memories as JSON."),
) -> None:
    """Store memories: from arguments, stdin, --file or --jsonl."""
    from memvault import files, ingest

    state = _state(ctx)
    sources = [bool(text and text != ["-"]), file is not None, jsonl is not None]
    if sum(sources) > 1:
        raise UsageError("give the text one way: arguments, --file or --jsonl")
    files.check_conversation_id(conversation)
    role = ingest.role_for_kind(kind.value)
    extra = ingest.extra_fields(kind.value, tag, source, rationale, alternative)
    if jsonl is not None:
        raw = _read_stdin(ctx) if jsonl == "-" else _read_path(Path(jsonl))
        origin = "stdin" if jsonl == "-" else jsonl
        memories = ingest.parse_jsonl(raw, origin, {
            "conversation_id": conversation, "kind": kind.value, "tags": tag, "source": source,
            "rationale": rationale, "alternatives": alternative,
        })
        if not memories:
            raise MemvaultError(f"nothing to add: {origin} has no JSON lines")
    else:
        raw = _read_path(file) if file is not None else (" ".join(text) if text and text != ["-"] else _read_stdin(ctx))
        pieces = ingest.split_lines(raw) if each_line else [raw]
        pieces = [p for p in pieces if p.strip()]
        if not pieces:
            raise MemvaultError("nothing to add: the text is empty")
        memories = [files.new_memory(p, role, conversation, extra=dict(extra)) for p in pieces]
    vault = state.vault()
    ingest.store(vault, memories, "add")
    if json_output or state.json:
        emit_json([ingest.memory_json(vault, m) for m in memories])
    else:
        for memory in memories:
            typer.echo(f"{memory.id}  {vault.relative(memory.path)}")


_ACTION_MARKS = {"added": "+", "edited": "~", "deleted": "-", "replaced": ">", "evicted": "x",
                 "removed": "!", "restored": "^", "purged": "!"}


@app.command()
def log(
    ctx: typer.Context,
    memory_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="Follow one memory (id or unique prefix)."),
    max_count: Optional[int] = typer.Option(None, "-n", "--max-count", min=1, help="Show at most N commits."),
    since: Optional[str] = typer.Option(None, "--since", help="Only commits after this date (git syntax)."),
    json_output: bool = typer.Option(False, "--json", help="Print the history as JSON."),
) -> None:
    """History of memory changes, from git."""
    from memvault.history import history

    state = _state(ctx)
    vault = state.vault()
    if not vault.exists():
        raise MemvaultError(f"no vault at {vault.root} (it is created by the first `memvault add`)")
    entries = history(vault.root, limit=max_count, since=since, follow=memory_id)
    if json_output or state.json:
        emit_json([e.to_json() for e in entries])
        return
    for entry in entries:
        typer.echo(f"{entry.date:%Y-%m-%d %H:%M:%S}  {entry.command}  {entry.commit[:8]}  {entry.subject}")
        for change in entry.changes:
            mark = _ACTION_MARKS.get(change.action, "?")
            tail = f"  -> {change.replaced_by[:8]}" if change.replaced_by else ""
            reason = f" ({change.reason})" if change.reason and change.action in ("deleted",) else ""
            typer.echo(f"  {mark} {change.action:<8} {change.id[:8]}  {change.text}{reason}{tail}")


def main() -> None:
    app(prog_name="memvault")


if __name__ == "__main__":
    main()
