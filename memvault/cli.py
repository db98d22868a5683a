"""The `memvault` command line: a thin layer over the library.

Results go to stdout, everything else to stderr. Heavy modules (lancedb,
fastembed, litellm, git) are imported inside the commands that need them so
that `memvault --help` stays fast.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from memvault import __version__, term
from memvault.completion import complete_conversation, complete_live_memory_id, complete_memory_id
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
        except OSError as exc:
            # The system said no (disk full, read-only, permissions): one line naming the file.
            where = f"{exc.filename}: " if exc.filename else ""
            _error(f"{where}{exc.strerror or exc}")
            raise typer.Exit(1) from None
        except RuntimeError as exc:
            if "lance error" not in str(exc).lower():
                raise
            detail = re.sub(r",\s*\S+\.rs:\d+:\d+\s*$", "", " ".join(str(exc).split()))
            _error(f"the index under .memvault/ is unreadable ({detail}); `memvault reindex` repairs it")
            raise typer.Exit(1) from None


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

        vault = Vault.open(self.vault_path or default_vault_path(), {**self.overrides, **overrides})
        if self.quiet:
            vault.notice = None
        return vault


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
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation id.",
                                     autocompletion=complete_conversation),
    kind: Kind = typer.Option(Kind.fact, "--kind", help="fact (role memory), note or decision."),
    tag: Optional[list[str]] = typer.Option(None, "--tag", "-t", help="Tag (repeatable)."),
    source: Optional[str] = typer.Option(None, "--source", help="Where the memory comes from (URL, file, book)."),
    rationale: Optional[str] = typer.Option(None, "--rationale", help="Why (for decisions)."),
    alternative: Optional[list[str]] = typer.Option(None, "--alternative", help="An alternative considered (repeatable)."),
    extract: bool = typer.Option(False, "--extract", help="Let the LLM extract and reconcile facts "
                                                           "instead of storing the text verbatim."),
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
    if extract:
        _add_extract(ctx, vault, memories, json_output or state.json)
        return
    ingest.store(vault, memories, "add")
    if json_output or state.json:
        emit_json([ingest.memory_json(vault, m) for m in memories])
    else:
        for memory in memories:
            typer.echo(f"{memory.id}  {vault.relative(memory.path)}")


def _add_extract(ctx, vault, memories, as_json: bool) -> None:
    from memvault import learn
    from memvault.index import Index
    from memvault.llm import LLMError

    settings = vault.settings
    cfg = learn.llm_config(settings)
    index = Index(vault, notice=_notice_printer(ctx))
    results = []
    try:
        with vault.change("add") as change:
            index.sync()
            for memory in memories:
                learned = learn.learn(change, index, cfg, memory.text, memory.conversation_id,
                                      summarize=settings.enable_summarization, max_entries=settings.max_entries,
                                      warn=_notice_printer(ctx), reconcile_mode=settings.reconcile_mode)
                results.extend(learned.to_json())
                # Facts of this input are candidates for the next one in the same run.
                index.sync(paths=change.written_paths | change.removed_paths)
    except LLMError as exc:
        raise _llm_error(exc) from None
    if as_json:
        emit_json(results)
    elif not results:
        info(ctx, "memvault: no facts found")
    for row in results if not as_json else []:
        typer.echo(f"{row['event']:<6} {row['id']}  {row['text']}")


_ACTION_MARKS = {"added": "+", "edited": "~", "deleted": "-", "replaced": ">", "evicted": "x",
                 "removed": "!", "restored": "^", "purged": "!"}


@app.command()
def log(
    ctx: typer.Context,
    memory_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="Follow one memory (id or unique prefix).",
                                              autocompletion=complete_memory_id),
    max_count: Optional[int] = typer.Option(None, "-n", "--max-count", min=1, help="Show at most N commits."),
    since: Optional[str] = typer.Option(None, "--since", help="Only commits after this date (git syntax)."),
    json_output: bool = typer.Option(False, "--json", help="Print the history as JSON."),
) -> None:
    """History of memory changes, from git."""
    from memvault.history import history

    state = _state(ctx)
    vault = state.vault()
    vault.require_existing()
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


@app.command()
def show(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="Memory id or unique prefix (at least 4 characters).",
                                    autocompletion=complete_memory_id),
    raw: bool = typer.Option(False, "--raw", help="Print the file's bytes as they are."),
    json_output: bool = typer.Option(False, "--json", help="Print the memory as JSON."),
) -> None:
    """Show one memory: its front matter as a key list, then its text. Deleted ones too."""
    from memvault import manage

    state = _state(ctx)
    as_json = json_output or state.json
    if raw and as_json:
        raise UsageError("--raw and --json do not go together")
    vault = state.vault()
    memory = manage.find(vault, memory_id)
    if raw:
        sys.stdout.flush()
        sys.stdout.buffer.write(manage.raw_bytes(memory))
        sys.stdout.flush()
    elif as_json:
        emit_json(manage.show_json(vault, memory))
    else:
        _print_memory(vault, memory)


def _print_memory(vault, memory) -> None:
    from memvault import manage

    rows = manage.front_matter_rows(vault, memory)
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


@app.command()
def edit(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="Memory id or unique prefix (at least 4 characters).",
                                    autocompletion=complete_live_memory_id),
    json_output: bool = typer.Option(False, "--json", help="Print the memory after the edit as JSON."),
) -> None:
    """Edit a memory in $VISUAL or $EDITOR (else vi), then validate, re-index and commit.

    The editor works on a copy. A broken edit changes nothing: the memory stays as it was
    and the rejected text is kept in .memvault/rejected/ (never committed).
    """
    from memvault import manage

    state = _state(ctx)
    vault = state.vault()
    interactive = term.is_terminal(sys.stdin) and term.is_terminal(sys.stderr)
    result = manage.edit(vault, memory_id, retry=_ask_edit_again if interactive else None)
    if json_output or state.json:
        emit_json({**manage.show_json(vault, result.memory), "changed": result.changed})
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
def rm(
    ctx: typer.Context,
    memory_ids: list[str] = typer.Argument(..., metavar="ID", help="Memory id or unique prefix (one or more).",
                                           autocompletion=complete_live_memory_id),
    json_output: bool = typer.Option(False, "--json", help="Print the removed memories as JSON."),
) -> None:
    """Remove memories: a soft delete (moved under deleted/, reason user), committed."""
    from memvault import manage

    state = _state(ctx)
    vault = state.vault()
    removed = manage.remove(vault, memory_ids)
    if json_output or state.json:
        emit_json([manage.show_json(vault, m) for m in removed])
    else:
        for memory in removed:
            typer.echo(f"removed {memory.id}  [{memory.role}] {memory.first_line(60)}")



def _time_option(value: Optional[str], name: str):
    if value is None:
        return None
    from memvault.files import parse_time

    try:
        return parse_time(value, name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


class SearchKind(str, Enum):
    fact = "fact"
    note = "note"
    decision = "decision"
    turn = "turn"


_KIND_ROLES = {"fact": ("memory",), "note": ("note",), "decision": ("decision",), "turn": ("user", "assistant")}


class Retriever(str, Enum):
    hybrid = "hybrid"
    dense = "dense"
    bm25 = "bm25"


class OutputFormat(str, Enum):
    text = "text"
    prompt = "prompt"
    json = "json"


def _notice_printer(ctx: typer.Context):
    quiet = _state(ctx).quiet
    return lambda message: None if (quiet or not message) else sys.stderr.write(message.rstrip("\n") + "\n")


def _open_index(ctx: typer.Context, vault):
    from memvault.index import Index

    vault.require_existing()
    return Index(vault, notice=_notice_printer(ctx))


def _sync_before_read(ctx: typer.Context, vault, index) -> None:
    """Bring the index up to date before reading (index only, never git). If another process is
    writing right now, read the index as it is rather than wait: that process is syncing it.
    Unless there is no index state yet (the index is being built or rebuilt): then wait for it.
    A vault that cannot be written (read-only) is searched as it is."""
    import errno

    from memvault.lock import vault_lock

    try:
        vault.sidecar.mkdir(exist_ok=True)
        with vault_lock(vault.lock_path, timeout=0, holder="search (index sync)") as got:
            report = index.sync() if got else None
        if report is None:
            if index.state_path.exists():
                if _state(ctx).verbose:
                    info(ctx, "memvault: another process is writing; searching the index as it is")
                return
            with vault_lock(vault.lock_path, timeout=vault.settings.lock_timeout, holder="search (index sync)",
                            on_wait=vault.notice):
                report = index.sync()
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        info(ctx, f"memvault: vault {vault.root} is read-only ({exc.strerror}); searching the index as it is")
        return
    for problem in report.skipped:
        info(ctx, f"memvault: skipped {problem}")
    if report.adopted:
        info(ctx, f"memvault: {len(report.adopted)} file(s) without front matter read as notes; "
                  "`memvault reindex` adds their front matter")


@app.command()
def search(
    ctx: typer.Context,
    query: Optional[str] = typer.Argument(None, help="What to look for."),
    top_k: Optional[int] = typer.Option(None, "-k", "--top-k", min=1, help="How many results (default_top_k)."),
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation to search, plus global.",
                                     autocompletion=complete_conversation),
    all_conversations: bool = typer.Option(False, "--all-conversations", "-a", help="Search every conversation."),
    kind: Optional[list[SearchKind]] = typer.Option(None, "--kind", help="Only these kinds (repeatable)."),
    tag: Optional[list[str]] = typer.Option(None, "--tag", "-t", help="Only memories with this tag (repeatable)."),
    since: Optional[str] = typer.Option(None, "--since", metavar="ISO", help="Only memories created at or after."),
    until: Optional[str] = typer.Option(None, "--until", metavar="ISO", help="Only memories created at or before."),
    now: Optional[str] = typer.Option(None, "--now", metavar="ISO", help="The clock for recency (scripts, tests)."),
    no_rerank: bool = typer.Option(False, "--no-rerank", help="Skip the cross-encoder."),
    recency_weight: Optional[float] = typer.Option(None, "--recency-weight", min=0.0, max=1.0,
                                                   help="Weight of recency in the score (recency_weight)."),
    mmr_lambda: Optional[float] = typer.Option(None, "--mmr-lambda", min=0.0, max=1.0,
                                               help="MMR trade-off; 1.0 = no diversity (mmr_lambda)."),
    threshold: Optional[float] = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                              help="Drop results whose reranker probability is below this."),
    retriever: Retriever = typer.Option(Retriever.hybrid, "--retriever", help="Candidates from hybrid, dense or bm25."),
    explain: bool = typer.Option(False, "--explain", help="Show every score of every result."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format",
                                               help="text, prompt (the block a chat injects) or json."),
    queries: Optional[str] = typer.Option(None, "--queries", metavar="FILE|-",
                                          help='Many searches: JSON lines {"qid", "query", "conversation_id"?, '
                                               '"now"?, "k"?}; prints {"qid", "results"} lines.'),
    json_output: bool = typer.Option(False, "--json", help="Results as JSON."),
) -> None:
    """Search memories: hybrid retrieval, rerank, recency, diversity."""
    from memvault import files
    from memvault.retrieval import Query, injection_block, load_reranker, read_summary, search as run_search

    state = _state(ctx)
    if query is None and queries is None:
        raise UsageError("give a QUERY or --queries FILE")
    files.check_conversation_id(conversation)
    vault = state.vault(recency_weight=recency_weight, mmr_lambda=mmr_lambda, score_threshold=threshold)
    settings = vault.settings
    index = _open_index(ctx, vault)
    _sync_before_read(ctx, vault, index)
    roles = tuple(r for k in (kind or []) for r in _KIND_ROLES[k.value]) or None
    base = dict(
        top_k=top_k or settings.default_top_k, all_conversations=all_conversations,
        tags=tuple(tag or ()), since=_time_option(since, "--since"), until=_time_option(until, "--until"),
        now=_time_option(now, "--now"), rerank=not no_rerank, recency_weight=settings.recency_weight,
        mmr_lambda=settings.mmr_lambda, threshold=settings.score_threshold,
        use_dense=retriever != Retriever.bm25, use_bm25=retriever != Retriever.dense,
    )
    if roles:
        base["roles"] = roles
    notes: list[str] = []
    reranker = None if no_rerank else load_reranker(settings, warn=lambda m: notes.append(m))
    for note in notes:
        info(ctx, f"memvault: {note}")
    rerank_note = notes[0] if notes else None

    if queries is not None:
        raw = _read_stdin(ctx) if queries == "-" else _read_path(Path(queries))
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                if not isinstance(item, dict) or not isinstance(item.get("query"), str):
                    raise ValueError("expected an object with a 'query' string")
                conv = str(item.get("conversation_id") or conversation)
                files.check_conversation_id(conv)
                one = Query(text=item["query"], conversation=conv, **{
                    **base, "top_k": int(item.get("k") or base["top_k"]),
                    "now": _time_option(item["now"], "now") if item.get("now") else base["now"]})
            except (ValueError, TypeError) as exc:
                raise UsageError(f"{queries if queries != '-' else 'stdin'} line {number}: {exc}") from None
            outcome = run_search(index, one, reranker, rerank_note)
            sys.stdout.write(json.dumps({"qid": item.get("qid"), "results": [r.to_json() for r in outcome.results]},
                                        ensure_ascii=False) + "\n")
        return

    outcome = run_search(index, Query(text=query, conversation=conversation, **base), reranker, rerank_note)
    if json_output or state.json or output_format == OutputFormat.json:
        emit_json([r.to_json() for r in outcome.results])
    elif output_format == OutputFormat.prompt:
        typer.echo(injection_block(outcome.results, read_summary(vault, conversation)))
    elif explain:
        _print_explain(outcome)
    else:
        for r in outcome.results:
            typer.echo(f"{r.score:.3f}  {r.id[:8]}  [{r.role}] {' '.join(r.text.split())}")


def _print_explain(outcome) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=None, show_lines=False)
    columns = ["mmr", "id", "dense", "bm25", "rrf", "fused", "logit", "relevance", "recency", "score", "text"]
    for name in columns:
        table.add_column(name, overflow="fold", max_width=48 if name == "text" else None)

    def number(value, digits=3):
        return "-" if value is None else f"{value:.{digits}f}"

    for r in outcome.results:
        s = r.scores
        table.add_row(str(s.get("mmr_rank")), r.id[:8], number(s.get("dense")), number(s.get("bm25")),
                      number(s.get("rrf"), 4), number(s.get("fused")), number(s.get("logit")), number(s.get("relevance")),
                      number(s.get("recency")), number(s.get("score")), " ".join(r.text.split()))
    console = Console(width=max(120, Console().width))
    console.print(table)
    stage = "reranker: ran" if outcome.reranked else f"reranker: did not run ({outcome.rerank_note}); " \
                                                     "relevance = min-max of fused (dense + BM25)"
    console.print(stage)


@app.command()
def reindex(
    ctx: typer.Context,
    full: bool = typer.Option(False, "--full", help="Rebuild the index from scratch."),
    check: bool = typer.Option(False, "--check", help="Write nothing; list drift; exit 1 if out of date."),
    watch: bool = typer.Option(False, "--watch", help="Keep the index in sync until Ctrl-C."),
    json_output: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Sync the index with the files; commit hand edits."""
    from memvault import sync as syncing

    state = _state(ctx)
    vault = state.vault()
    vault.require_existing()
    if check:
        report = syncing.check(vault)
        for problem in report.skipped:
            info(ctx, f"memvault: skipped {problem}")
        if json_output or state.json:
            emit_json(report.to_json())
        else:
            for label, paths in (("added", report.added), ("changed", report.changed), ("removed", report.removed)):
                for path in paths:
                    typer.echo(f"{label:<8} {path}")
            if report.rebuilt:
                typer.echo(f"rebuild  {report.rebuilt}")
        raise typer.Exit(1 if report.drift or report.skipped else 0)
    if watch:
        syncing.watch(vault, notice=_notice_printer(ctx), quiet=state.quiet)
        return
    report = syncing.reindex(vault, full=full, notice=_notice_printer(ctx), progress=not state.quiet)
    for problem in report.skipped:
        _error(f"skipped {problem}")
    for memory in report.adopted:
        info(ctx, f"memvault: adopted {vault.relative(memory.path)} as a note (front matter added)")
    if json_output or state.json:
        emit_json(report.to_json())
    else:
        typer.echo(report.summary())
    if report.skipped:
        raise typer.Exit(1)


@app.command()
def models(
    ctx: typer.Context,
    download: bool = typer.Option(False, "--download", help="Fetch the configured models into fastembed's cache "
                                                             "(the only command that downloads)."),
    json_output: bool = typer.Option(False, "--json", help="Print the status as JSON."),
) -> None:
    """Show the embedding model and reranker in use; --download fetches them."""
    from memvault.models import ModelError, get_embedder, get_reranker

    state = _state(ctx)
    settings = state.vault().settings
    status: dict[str, Any] = {}
    try:
        embedder = get_embedder(settings.embedding_model, allow_download=download)
        status["embedding_model"] = {"name": embedder.name, "dim": embedder.dim, "fingerprint": embedder.fingerprint,
                                     "available": True}
    except ModelError as exc:
        status["embedding_model"] = {"name": settings.embedding_model, "available": False, "error": str(exc)}
    problems: list[str] = []
    reranker = get_reranker(settings.reranker_model, warn=problems.append, allow_download=download)
    status["reranker_model"] = {"name": settings.reranker_model, "available": reranker is not None,
                                **({"error": problems[0]} if problems else {})}
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


def _llm_error(exc) -> MemvaultError:
    return MemvaultError(str(exc))


class Style(str, Enum):
    conversation = "conversation"
    journal = "journal"
    document = "document"


@app.command()
def chat(
    ctx: typer.Context,
    message: Optional[list[str]] = typer.Argument(None, help="The message; none reads stdin (or starts an "
                                                            "interactive chat on a terminal)."),
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation id.",
                                      autocompletion=complete_conversation),
    model: Optional[str] = typer.Option(None, "--model", help="litellm model string (llm_model)."),
    no_learn: bool = typer.Option(False, "--no-learn", help="Do not extract facts from this message."),
    no_memory: bool = typer.Option(False, "--no-memory", help="Do not retrieve memories."),
    no_stream: bool = typer.Option(False, "--no-stream", help="Print the reply in one piece."),
    context: bool = typer.Option(False, "--context", help="Show the session: turns, tokens, idle time, summary."),
    clear: bool = typer.Option(False, "--clear", help="Start a fresh session."),
    now: Optional[str] = typer.Option(None, "--now", metavar="ISO", help="Clock override (scripts, tests)."),
    json_output: bool = typer.Option(False, "--json", help="One-shot: reply, memories used, facts learned as JSON."),
) -> None:
    """Chat with an LLM that remembers: retrieve, answer, learn.

    After the reply, up to 3 facts about you are taken from your message; an older fact one of them makes untrue is moved under deleted/ (replaced_by names the new one); all in one commit.
    """
    from memvault import files

    state = _state(ctx)
    files.check_conversation_id(conversation)
    vault = state.vault(llm_model=model)
    clock = _time_option(now, "--now")
    if context:
        _show_context(ctx, vault, conversation, clock or files.utcnow(), json_output or state.json)
        return
    if clear:
        from memvault.chat import clear_session

        clear_session(vault, conversation, clock)
        info(ctx, f"memvault: new session for {conversation}")
        if not message:
            return
    text = " ".join(message) if message else None
    if text is None and sys.stdin is not None and sys.stdin.isatty():
        if json_output or state.json:
            raise UsageError("--json needs a MESSAGE (or stdin)")
        _interactive(ctx, vault, conversation, no_learn, no_memory, no_stream, clock)
        return
    if text is None:
        text = _read_stdin(ctx)
    text = text.strip()
    if not text:
        raise MemvaultError("nothing to send: the message is empty")
    files.new_memory(text, "user", conversation)  # refuse what could not be stored (size) before any model runs
    _one_turn(ctx, vault, text, conversation, no_learn, no_memory, no_stream, clock, json_output or state.json)


def _one_turn(ctx, vault, text, conversation, no_learn, no_memory, no_stream, clock, as_json) -> None:
    from memvault.chat import ChatOptions, chat_turn
    from memvault.llm import LLMError

    def write(piece: str) -> None:
        if not as_json:
            sys.stdout.write(piece)
            sys.stdout.flush()

    options = ChatOptions(conversation=conversation, learn=not no_learn, use_memory=not no_memory,
                          stream=not no_stream and not as_json, now=clock)
    try:
        result = chat_turn(vault, text, options, write, warn=_notice_printer(ctx))
    except LLMError as exc:
        raise _llm_error(exc) from None
    if as_json:
        emit_json({"conversation_id": conversation, "reply": result.reply,
                   "memories": [r.to_json() for r in result.memories],
                   "learned": result.learned.to_json() if result.learned else [],
                   "folded_turns": result.folded, "upkeep_error": result.upkeep_error})
    else:
        sys.stdout.write("\n")
        sys.stdout.flush()
    if result.upkeep_error:
        info(ctx, f"memvault: warning: reply kept, but memory upkeep failed: {result.upkeep_error}")
    elif result.learned and _state(ctx).verbose:
        for row in result.learned.to_json():
            info(ctx, f"memvault: learned {row['event']} {row['text']}")


def _interactive(ctx, vault, conversation, no_learn, no_memory, no_stream, clock) -> None:
    info(ctx, f"memvault chat ({conversation}); an empty line or Ctrl-D ends it")
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            sys.stderr.write("\n")
            return
        if not line.strip():
            return
        try:
            _one_turn(ctx, vault, line, conversation, no_learn, no_memory, no_stream, clock, False)
        except MemvaultError as exc:
            _error(str(exc))


def _show_context(ctx, vault, conversation: str, now, as_json: bool) -> None:
    from memvault import learn, sessions

    settings = vault.settings
    session = sessions.load(vault, conversation, now, settings.hard_decay_minutes)
    idle = session.idle(now)
    summary = learn.read_rolling_summary(vault, conversation)
    data = {
        "conversation_id": conversation,
        "turns": [{"role": t.role, "created_at": t.created_at.isoformat(), "text": t.text} for t in session.turns],
        "tokens": session.tokens(),
        "max_session_tokens": settings.max_session_tokens,
        "idle_seconds": None if idle is None else round(idle.total_seconds()),
        "fresh_session": session.fresh_reason,
        "session_summary": session.summary,
        "summary": summary.text if summary else None,
    }
    if as_json:
        emit_json(data)
        return
    idle_text = "no turns yet" if idle is None else f"idle {int(idle.total_seconds() // 60)} min"
    typer.echo(f"conversation {conversation}: {len(session.turns)} turns, ~{data['tokens']} tokens "
               f"(ceiling {settings.max_session_tokens}), {idle_text}"
               + (f"; next message starts a fresh session ({session.fresh_reason})" if session.fresh_reason else ""))
    if session.summary:
        typer.echo(f"session summary: {session.summary}")
    for t in session.turns:
        typer.echo(f"{t.created_at:%Y-%m-%d %H:%M}  {t.role:<9} {' '.join(t.text.split())[:100]}")
    if summary:
        typer.echo(f"conversation summary: {summary.text}")


@app.command()
def reconcile(
    ctx: typer.Context,
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation to consolidate.",
                                      autocompletion=complete_conversation),
    all_conversations: bool = typer.Option(False, "--all", help="Every conversation."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; change nothing."),
    json_output: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Consolidate near-duplicate and contradicting facts with the LLM."""
    from memvault import consolidate, files
    from memvault.learn import llm_config
    from memvault.llm import LLMError

    state = _state(ctx)
    files.check_conversation_id(conversation)
    vault = state.vault()
    index = _open_index(ctx, vault)
    cfg = llm_config(vault.settings)
    with vault.change("reconcile") as change:
        index.sync()
        conversations = [conversation]
        if all_conversations:
            conversations = sorted({m.conversation_id for m in vault.iter_memories(roles=("memory",))})
        try:
            plans = [p for c in conversations for p in consolidate.plan(index, cfg, c, vault.settings.reconcile_mode)]
        except LLMError as exc:
            raise _llm_error(exc) from None
        if not dry_run:
            consolidate.apply(change, plans)
    steps = [step for plan in plans for step in plan.steps]
    if json_output or state.json:
        emit_json([{"conversation_id": p.conversation, "newest": {"id": p.newest.id, "text": p.newest.text},
                    "steps": [s.to_json() for s in p.steps]} for p in plans])
        return
    if not plans:
        typer.echo("no near-duplicate or conflicting facts found")
        return
    for plan in plans:
        typer.echo(f"cluster around {plan.newest.id[:8]}  {plan.newest.first_line()}")
        for step in plan.steps:
            what = {"DELETE": f"-> replaced by {step.replacement[:8]}" if step.replacement else "",
                    "UPDATE": f"-> {step.replacement}", "KEEP": ""}[step.decision]
            typer.echo(f"  {step.decision:<6} {step.memory.id[:8]}  {step.memory.first_line()}  {what}".rstrip())
    changed = sum(1 for s in steps if s.decision != "KEEP")
    info(ctx, f"memvault: {'would change' if dry_run else 'changed'} {changed} of {len(steps)} older facts")


@app.command()
def summarize(
    ctx: typer.Context,
    conversation: str = typer.Option("global", "-c", "--conversation", help="Conversation to summarize.",
                                      autocompletion=complete_conversation),
    rebuild: bool = typer.Option(False, "--rebuild", help="Rebuild from all entries, depth chosen by size."),
    style: Style = typer.Option(Style.conversation, "--style", help="Prompt variant for the kind of content."),
    print_summary: bool = typer.Option(False, "--print", help="Write the summary to stdout."),
    json_output: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
) -> None:
    """Update the rolling summary, or --rebuild it from every entry."""
    from memvault import files, summaries
    from memvault.learn import llm_config
    from memvault.llm import LLMError

    state = _state(ctx)
    files.check_conversation_id(conversation)
    vault = state.vault()
    vault.require_existing()
    cfg = llm_config(vault.settings)
    try:
        with vault.change("summarize") as change:
            if rebuild:
                outcome = summaries.rebuild(change, cfg, conversation, style.value)
            else:
                outcome = summaries.update(change, cfg, conversation)
            change.title = f"{outcome.kind} summary ({conversation})"
    except LLMError as exc:
        raise _llm_error(exc) from None
    if json_output or state.json:
        emit_json(outcome.to_json())
        return
    if outcome.kind == "none":
        info(ctx, f"memvault: {outcome.input_tokens} tokens in {conversation}: too little to summarize")
    else:
        levels = ", ".join(f"{k}: {v}" for k, v in outcome.levels.items())
        info(ctx, f"memvault: {outcome.kind} summary, {outcome.input_tokens} -> {outcome.output_tokens} tokens"
                  + (f" ({levels})" if levels else ""))
    if print_summary and outcome.text:
        typer.echo(outcome.text)


def main() -> None:
    app(prog_name="memvault")


if __name__ == "__main__":
    main()
