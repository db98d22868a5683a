#!/usr/bin/env python3
"""Generate the shell completions and the man page from the live CLI definitions.

    python tools/gendocs.py           # rewrite completions/* and man/memvault.1
    python tools/gendocs.py --check   # exit 1 (and say which) if any of them is out of date

Everything is read from the command tree that typer builds from
memvault/faces/cli.py (commands, options, help, metavars, choices) and from the
Settings dataclass in memvault/store/config.py, so adding a command or an option only
needs a rerun of this script. The output is deterministic: commands and settings
are sorted by name; options keep the order in which the command declares them.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import re
import sys
import types
import typing
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path, PurePath

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROG = "memvault"
BASH = REPO / "completions" / "memvault.bash"
ZSH = REPO / "completions" / "_memvault"
FISH = REPO / "completions" / "memvault.fish"
MAN = REPO / "man" / "memvault.1"

# What each setting means (the man page's ENVIRONMENT section). A new key in
# memvault/store/config.py Settings must be described here: generation fails until it is.
SETTING_HELP = {
    "embedding_model": "Embedding model: the bundled offline all-MiniLM-L6-v2 (int8, 384 dimensions) by default, "
                       "or any fastembed model name (fetch it once with memvault models --download). "
                       "Changing it rebuilds the index.",
    "reranker_model": "Cross-encoder for reranking: a fastembed model name, or a local folder holding "
                      "model.onnx and tokenizer files.",
    "llm_model": "LLM for chat, add --extract, reconcile and summarize, as a litellm model string "
                 "(openai/<name> for any OpenAI-compatible server).",
    "llm_base_url": "Base URL of the OpenAI-compatible LLM endpoint (Ollama by default).",
    "llm_api_key": "API key for the LLM endpoint. Only from the environment (MEMVAULT_LLM_API_KEY), "
                   "never from memvault.toml, which is committed.",
    "llm_timeout": "Seconds to wait for the LLM.",
    "llm_temperature": "LLM sampling temperature (0 to 2).",
    "default_top_k": "How many results search returns without -k.",
    "max_entries": "Chat turns and learned facts kept per conversation; the oldest beyond are evicted (at most 20 a command); what you add is never evicted.",
    "mmr_lambda": "Relevance versus diversity among near-duplicates (cosine 0.9 or more; between two facts, "
                  "notes or decisions of different sessions 0.75 or more: paraphrases) in the final pick (1 = no diversity).",
    "recency_weight": "How much age can take off a result's score: score = relevance x (1 - w + w x recency) "
                      "(0 = ignore age).",
    "score_threshold": "Drop results whose relevance (with a reranker: its probability) is below this (0 to 1); "
                       "unset keeps all.",
    "llm_rerank": "Without a cross-encoder: let the LLM (llm_model) put the first 10 results of a search in "
                  "its order, the memories it finds helpful first. One LLM call per search.",
    "llm_query_parts": "Let the LLM (llm_model) split a question that asks two things into its parts, each "
                       "searched too (else rules do). One LLM call per search.",
    "relevance_floor": "Without a reranker: leave out memories whose absolute match with the query (0 to 1: "
                       "cosine and the share of the query's words they hold) is below this (0 = off).",
    "session_weight": "How much a memory's session lifts its relevance: chat turns (and facts) of one "
                      "conversation with no hour of silence between them vouch for each other "
                      "(relevance r becomes r + w x s x (1 - r), s from the best two others; 0 = off).",
    "enable_summarization": "Keep a rolling summary per conversation.",
    "enable_git_versioning": "Make every change a git commit.",
    "soft_decay_minutes": "Chat: after this much silence, older turns are folded into a session summary.",
    "hard_decay_minutes": "Chat: after this much silence, a fresh session starts.",
    "max_session_tokens": "Chat: above this many tokens, the oldest turns of the session are summarized.",
    "lock_timeout": "Seconds a command that writes waits for another memvault process writing to the vault "
                    "(a chat holds the vault while the LLM answers) before it gives up.",
    "serve_api_key": "The key clients of memvault serve must send (Authorization: Bearer KEY); required to "
                     "bind an address other than the loopback one. Only from the environment "
                     "(MEMVAULT_SERVE_API_KEY), never from memvault.toml, which is committed.",
    "anthropic_base_url": "The Anthropic Messages endpoint (its root, without /v1) that memvault serve's "
                          "POST /v1/messages hands requests to, as the client sent them, memories added.",
    "anthropic_api_key": "The key memvault serve sends that endpoint (x-api-key) when the client sends no "
                         "credentials of its own. Only from the environment (MEMVAULT_ANTHROPIC_API_KEY), "
                         "never from memvault.toml, which is committed.",
    "anthropic_upstream": "Where memvault serve's POST /v1/messages goes: anthropic (anthropic_base_url, the "
                          "request as the client sent it) or litellm (llm_model at llm_base_url, any provider "
                          "litellm reaches, the request translated by litellm).",
    "agent": "The CLI's warm path: off (every command loads what it needs itself), use (a running memvault "
             "agent of the vault carries the commands out) or auto (also start one in the background on the "
             "first command; it exits after agent_idle_minutes without one). Same output and exit codes either way.",
    "agent_idle_minutes": "Minutes without a command after which a memvault agent exits.",
    "fetch_models": "true: a model the settings name that is not in the cache (the reranker) is fetched by the "
                    "first command that needs it, with progress; false: only memvault models --download fetches.",
    "share_repository": "true: a vault's first write may go into a folder that is a git repository tracking "
                        "other files (a project's code), every memory a commit of that project; false: refused, "
                        "nothing written.",
    "hook_timeout": "Seconds a coding agent's hook (memvault hook) may take for the events the agent waits for "
                    "(a session's start, a prompt); past it, nothing is injected and the hook log says so.",
    "hook_context_tokens": "Tokens (about four characters each) of what a coding agent's session is told at its "
                           "start: the project's summary, open decisions, recent sessions and notes.",
    "project_conversations": "Which conversation a coding agent's project is: a table of folder = conversation "
                             "(the deepest folder holding the agent's working folder wins); a folder not named is "
                             "its own conversation, its git root written ~/... (environment: a JSON object).",
    "reconcile_mode": "How new facts are checked against known ones: pairs (one yes/no question per nearby "
                      "fact; best with small local models) or list (one call per message, the model gives "
                      "every nearby fact an ADD/UPDATE/DELETE/NONE event).",
    "secret_scan": "Withhold secrets (API keys, tokens, passwords, private keys, URLs with a password): every "
                   "memory file holds a placeholder instead, the value goes to .memvault/withheld.jsonl (never "
                   "committed), nothing learned holds one, and sync does not push commits that do. Off: they are "
                   "stored, committed, injected into prompts and pushed as said.",
    "extraction_mode": "When and how facts are learned: message (from each user message) or predict-calibrate "
                       "(from each closed episode: the model guesses from the related known facts what was "
                       "said, then keeps only what the guess missed or got wrong).",
    "learned_review": "true: every learned fact waits for memvault review (stored and listed, never searched "
                      "or injected, replacing nothing) until it is kept. false (the default): learned facts are "
                      "live at once; only the retirement of a fact you added waits for review.",
}


# -- the model ----------------------------------------------------------------------------------

@dataclass
class Opt:
    short: list[str]
    long: list[str]
    takes_value: bool
    multiple: bool
    metavar: str
    help: str
    choices: list[str]
    complete: str  # none | free | choices | files | dirs | conversations | ids | live-ids
    default: str | None

    @property
    def all(self) -> list[str]:
        return self.short + self.long


@dataclass
class Arg:
    name: str
    metavar: str  # as shown in a synopsis, e.g. "[TEXT]..." or "ID"
    help: str
    variadic: bool
    required: bool
    complete: str  # free | ids | live-ids


@dataclass
class Cmd:
    name: str
    help: str
    short_help: str
    options: list[Opt] = field(default_factory=list)
    arguments: list[Arg] = field(default_factory=list)

    @property
    def synopsis_args(self) -> str:
        return " ".join(a.metavar for a in self.arguments)


@dataclass
class Cli:
    help: str
    global_options: list[Opt]
    commands: list[Cmd]


_CALLBACK_KINDS = {
    "complete_conversation": "conversations",
    "complete_memory_id": "ids",
    "complete_live_memory_id": "live-ids",
}


def _param_info(param):
    descriptor = getattr(param, "type_descriptor", None)
    return descriptor.annotation if descriptor else str, getattr(descriptor, "parameter_info", None)


def _base_type(annotation):
    """str for Optional[str], SearchKind for list[SearchKind], and so on."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return _base_type(args[0]) if args else str
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _base_type(args[0]) if args else str
    return annotation


def _completion_callback(param) -> str | None:
    """The memvault.faces.completion function given as typer autocompletion=, if any."""
    _annotation, info = _param_info(param)
    callback = getattr(info, "autocompletion", None)
    if callback is not None and getattr(callback, "__module__", None) == "memvault.faces.completion":
        return _CALLBACK_KINDS.get(callback.__name__)
    return None


def _choices(base) -> list[str]:
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return [str(m.value) for m in base]
    return []


def _type_metavar(base) -> str:
    if _choices(base):
        return "|".join(_choices(base))
    if base is int:
        return "N"
    if base is float:
        return "NUMBER"
    if isinstance(base, type) and issubclass(base, PurePath):
        return "PATH"
    return "TEXT"


def _option(param) -> Opt:
    opts = list(param.opts) + list(getattr(param, "secondary_opts", []) or [])
    short = [o for o in opts if not o.startswith("--")]
    long = [o for o in opts if o.startswith("--")]
    takes_value = not (getattr(param, "is_flag", False) or getattr(param, "count", False))
    annotation, _info = _param_info(param)
    base = _base_type(annotation)
    choices = _choices(base)
    metavar = (param.metavar or _type_metavar(base)) if takes_value else ""
    complete = "none"
    if takes_value:
        complete = _completion_callback(param) or ""
        if not complete:
            is_path = isinstance(base, type) and issubclass(base, PurePath)
            if "--conversation" in long:
                complete = "conversations"
            elif choices:
                complete = "choices"
            elif is_path and param.name == "vault":
                complete = "dirs"
            elif is_path or "FILE" in metavar:
                complete = "files"
            else:
                complete = "free"
    default = None
    if takes_value and param.default not in (None, (), [], ""):
        value = param.default
        if isinstance(value, enum.Enum):
            value = value.value
        default = str(value)
    return Opt(short, long, takes_value, bool(getattr(param, "multiple", False)), metavar,
               _clean(getattr(param, "help", None) or ""), choices, complete, default)


def _argument(param) -> Arg:
    name = (param.metavar or param.name or "ARG").strip("[]").rstrip(".").upper()
    variadic = param.nargs == -1
    required = bool(param.required)
    shown = name + ("..." if variadic else "")
    if not required:
        shown = f"[{name}]" + ("..." if variadic else "")
    complete = _completion_callback(param) or "free"
    return Arg(name, shown, _clean(getattr(param, "help", None) or ""), variadic, required, complete)


def _clean(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(text: str) -> list[str]:
    return [_clean(p) for p in re.split(r"\n\s*\n", (text or "").strip()) if p.strip()]


def _is_option(param) -> bool:
    return hasattr(param, "opts") and any(o.startswith("-") for o in param.opts)


def load_cli() -> Cli:
    import typer.main

    from memvault.faces.cli import app

    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name=PROG)
    global_options = [_option(p) for p in group.params if _is_option(p) and not getattr(p, "hidden", False)]
    commands = []
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        paragraphs = _paragraphs(command.help or "")
        cmd = Cmd(name, "\n\n".join(paragraphs), command.short_help or (paragraphs[0] if paragraphs else ""))
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            if _is_option(param):
                cmd.options.append(_option(param))
            else:
                cmd.arguments.append(_argument(param))
        commands.append(cmd)
    return Cli(_clean(group.help or ""), global_options, commands)


def settings_rows() -> list[tuple[str, str, str]]:
    """(key, default as shown, help) for every Settings key, sorted by key."""
    from memvault.store.config import Settings

    rows = []
    missing = []
    for f in sorted(dataclasses.fields(Settings), key=lambda f: f.name):
        if f.name not in SETTING_HELP:
            missing.append(f.name)
            continue
        value = f.default
        shown = "unset" if value in (None, ()) else ("true" if value is True else "false" if value is False else str(value))
        rows.append((f.name, shown, SETTING_HELP[f.name]))
    if missing:
        raise SystemExit(f"gendocs: describe the setting(s) {', '.join(missing)} in SETTING_HELP in {__file__}")
    return rows


def first_sentence(text: str) -> str:
    text = _clean(text)
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".")


# -- bash ---------------------------------------------------------------------------------------

def _sh_words(words: list[str]) -> str:
    return "'" + " ".join(words).replace("'", "'\\''") + "'"


def _bash_value_action(kind: str, choices: list[str]) -> str:
    return {
        "conversations": '_memvault_compgen -W "$(_memvault_conversations)" -- "$cur"',
        "ids": '_memvault_compgen -W "$(_memvault_ids all)" -- "$cur"',
        "live-ids": '_memvault_compgen -W "$(_memvault_ids live)" -- "$cur"',
        "files": "_memvault_files",
        "dirs": "_memvault_dirs",
        "choices": f'_memvault_compgen -W {_sh_words(choices)} -- "$cur"',
        "free": ":",
    }[kind]


def _bash_value_cases(options: list[Opt], indent: str) -> list[str]:
    """One case arm per completion action: `-c|--conversation) <action>; return ;;`."""
    arms: dict[str, list[str]] = {}
    for opt in options:
        if opt.takes_value:
            arms.setdefault(_bash_value_action(opt.complete, opt.choices), []).extend(opt.all)
    return [f"{indent}{'|'.join(names)}) {action}; return ;;" for action, names in arms.items()]


def gen_bash(cli: Cli) -> str:
    global_words = sorted(o for opt in cli.global_options for o in opt.all) + ["--help", "-h"]
    global_words = sorted(set(global_words))
    global_valued = [o for opt in cli.global_options if opt.takes_value for o in opt.all]
    out = [
        "# bash completion for memvault                             -*- shell-script -*-",
        "# Generated by tools/gendocs.py from the CLI definitions: do not edit by hand.",
        "# Install: see README.md, \"Shell completion and man page\".",
        "",
        "# The vault being completed: --vault on the command line, else $MEMVAULT_DIR, else the XDG default.",
        "_memvault_vault() {",
        "    local i",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        if [[ ${COMP_WORDS[i]} == --vault ]]; then",
        "            if [[ ${COMP_WORDS[i+1]} == = ]]; then i=$((i + 1)); fi",
        "            printf '%s\\n' \"${COMP_WORDS[i+1]/#\\~/$HOME}\"",
        "            return",
        "        fi",
        "    done",
        "    if [[ -n ${MEMVAULT_DIR:-} ]]; then",
        "        printf '%s\\n' \"${MEMVAULT_DIR/#\\~/$HOME}\"",
        "    else",
        "        printf '%s\\n' \"${XDG_DATA_HOME:-$HOME/.local/share}/memvault\"",
        "    fi",
        "}",
        "",
        "# Conversation folder names under entries/ (a hashed slug stands for an id that is not a plain",
        "# name; typing that slug would name another conversation, so it is not offered).",
        "_memvault_conversations() {",
        "    local root d name",
        "    root=$(_memvault_vault)",
        "    for d in \"$root\"/entries/*/; do",
        "        [[ -d $d ]] || continue",
        "        name=${d%/}",
        "        name=${name##*/}",
        "        [[ $name =~ -[0-9a-f]{10}$ ]] && continue",
        "        printf '%s\\n' \"$name\"",
        "    done",
        "}",
        "",
        "# Memory ids from file names (<ts>__<uuid>.md); $1 = all to include deleted memories.",
        "_memvault_ids() {",
        "    local root f name",
        "    root=$(_memvault_vault)",
        "    [[ -d $root/entries ]] || return 0",
        "    for f in \"$root\"/entries/*/*/*__*.md \"$root\"/entries/*/*/*/*__*.md \"$root\"/entries/*/*/*/*/*__*.md; do",
        "        [[ -f $f ]] || continue",
        "        if [[ $1 != all && ${f#\"$root\"/entries/*/} == deleted/* ]]; then continue; fi",
        "        name=${f##*__}",
        "        printf '%s\\n' \"${name%.md}\"",
        "    done",
        "}",
        "",
        "# compgen into COMPREPLY, one candidate per line (file names may hold spaces).",
        "_memvault_compgen() {",
        "    local line",
        "    COMPREPLY=()",
        "    while IFS= read -r line; do COMPREPLY+=(\"$line\"); done < <(compgen \"$@\")",
        "}",
        "",
        "_memvault_files() {",
        "    compopt -o filenames 2>/dev/null",
        "    _memvault_compgen -f -- \"$cur\"",
        "}",
        "",
        "_memvault_dirs() {",
        "    compopt -o filenames 2>/dev/null",
        "    _memvault_compgen -d -- \"$cur\"",
        "}",
        "",
        "_memvault() {",
        "    local cur prev cmd i",
        "    COMPREPLY=()",
        "    cur=${COMP_WORDS[COMP_CWORD]}",
        "    prev=${COMP_WORDS[COMP_CWORD-1]}",
        "    # --opt=value: bash splits at '=' (COMP_WORDBREAKS)",
        "    if [[ $cur == = ]]; then",
        "        cur=",
        "    elif [[ $prev == = ]]; then",
        "        prev=${COMP_WORDS[COMP_CWORD-2]}",
        "    fi",
        "    # The command: the first word that is neither an option nor the value of a global option.",
        "    cmd=",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        case ${COMP_WORDS[i]} in",
    ]
    if global_valued:
        out.append(f"            {'|'.join(global_valued)})")
        out.append("                if [[ ${COMP_WORDS[i+1]} == = ]]; then i=$((i + 2)); else i=$((i + 1)); fi ;;")
    out += [
        "            -*) ;;",
        "            *) cmd=${COMP_WORDS[i]}; break ;;",
        "        esac",
        "    done",
        "",
        "    case $cmd in",
        "        '')",
        "            case $prev in",
        *_bash_value_cases(cli.global_options, "                "),
        "            esac",
        "            if [[ $cur == -* ]]; then",
        f"                _memvault_compgen -W {_sh_words(global_words)} -- \"$cur\"",
        "            else",
        f"                _memvault_compgen -W {_sh_words([c.name for c in cli.commands])} -- \"$cur\"",
        "            fi",
        "            ;;",
    ]
    for cmd in cli.commands:
        words = sorted(set(o for opt in cmd.options for o in opt.all) | {"--help", "-h"})
        out.append(f"        {cmd.name})")
        cases = _bash_value_cases(cmd.options, "                ")
        if cases:
            out.append("            case $prev in")
            out += cases
            out.append("            esac")
        out.append("            if [[ $cur == -* ]]; then")
        out.append(f"                _memvault_compgen -W {_sh_words(words)} -- \"$cur\"")
        positional = next((a.complete for a in cmd.arguments if a.complete != "free"), None)
        if positional:
            out.append("            else")
            out.append(f"                {_bash_value_action(positional, [])}")
        out.append("            fi")
        out.append("            ;;")
    out += [
        "    esac",
        "    return 0",
        "}",
        "",
        "complete -F _memvault memvault",
        "",
    ]
    return "\n".join(out)


# -- zsh ----------------------------------------------------------------------------------------

def _zq(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _zdesc(text: str) -> str:
    return first_sentence(text).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _zmsg(text: str) -> str:
    return text.replace("\\", "\\\\").replace(":", "\\:")


def _zsh_action(kind: str, choices: list[str]) -> str:
    return {
        "conversations": "_memvault_conversations",
        "ids": "{_memvault_ids all}",
        "live-ids": "{_memvault_ids live}",
        "files": "_files",
        "dirs": "_files -/",
        "choices": "(" + " ".join(choices) + ")",
        "free": " ",
    }[kind]


def _zsh_option_specs(options: list[Opt], with_help: bool = True) -> list[str]:
    specs = []
    for opt in options:
        names = opt.all
        exclusive = "" if opt.multiple or len(names) == 1 else "(" + " ".join(names) + ")"
        prefix = "*" if opt.multiple else exclusive
        for name in names:
            suffix = ("=" if name.startswith("--") else "+") if opt.takes_value else ""
            spec = f"{prefix}{name}{suffix}[{_zdesc(opt.help)}]"
            if opt.takes_value:
                spec += f":{_zmsg(opt.metavar)}:{_zsh_action(opt.complete, opt.choices)}"
            specs.append(_zq(spec))
    if with_help:
        specs += [_zq("(- *)-h[Show help and exit]"), _zq("(- *)--help[Show help and exit]")]
    return specs


def _zsh_argument_specs(arguments: list[Arg]) -> list[str]:
    specs = []
    for arg in arguments:
        action = _zsh_action(arg.complete, []) if arg.complete != "free" else " "
        if arg.variadic:
            specs.append(_zq(f"*:{_zmsg(arg.name)}:{action}"))
        elif arg.required:
            specs.append(_zq(f":{_zmsg(arg.name)}:{action}"))
        else:
            specs.append(_zq(f"::{_zmsg(arg.name)}:{action}"))
    return specs


def gen_zsh(cli: Cli) -> str:
    out = [
        "#compdef memvault",
        "# zsh completion for memvault.",
        "# Generated by tools/gendocs.py from the CLI definitions: do not edit by hand.",
        "# Install: see README.md, \"Shell completion and man page\".",
        "",
        "# The vault being completed: --vault on the command line, else $MEMVAULT_DIR, else the XDG default.",
        "_memvault_vault() {",
        "  if [[ -n ${_memvault_vault_arg:-} ]]; then",
        "    print -r -- ${_memvault_vault_arg/#\\~/$HOME}",
        "  elif [[ -n ${MEMVAULT_DIR:-} ]]; then",
        "    print -r -- ${MEMVAULT_DIR/#\\~/$HOME}",
        "  else",
        "    print -r -- ${XDG_DATA_HOME:-$HOME/.local/share}/memvault",
        "  fi",
        "}",
        "",
        "# Conversation folder names under entries/, hashed slugs left out (see memvault.bash).",
        "_memvault_conversation_names() {",
        "  local root d",
        "  root=$(_memvault_vault)",
        "  for d in $root/entries/*(N/); do",
        "    [[ ${d:t} =~ '-[0-9a-f]{10}$' ]] && continue",
        "    print -r -- ${d:t}",
        "  done",
        "}",
        "",
        "# Memory ids from file names (<ts>__<uuid>.md); $1 = all to include deleted memories.",
        "_memvault_id_names() {",
        "  local root f rel",
        "  root=$(_memvault_vault)",
        "  for f in $root/entries/*/**/*__*.md(N.); do",
        "    rel=${f#$root/entries/*/}",
        "    [[ $1 != all && $rel == deleted/* ]] && continue",
        "    f=${f:t}",
        "    f=${f##*__}",
        "    print -r -- ${f%.md}",
        "  done",
        "}",
        "",
        "_memvault_conversations() {",
        "  local -a names expl",
        "  names=(${(f)\"$(_memvault_conversation_names)\"})",
        "  _wanted conversations expl conversation compadd -a names",
        "}",
        "",
        "_memvault_ids() {",
        "  local -a ids expl",
        "  ids=(${(f)\"$(_memvault_id_names $1)\"})",
        "  _wanted ids expl 'memory id' compadd -a ids",
        "}",
        "",
        "_memvault_commands() {",
        "  local -a commands",
        "  commands=(",
    ]
    for cmd in cli.commands:
        out.append("    " + _zq(f"{cmd.name}:{first_sentence(cmd.short_help)}"))
    out += [
        "  )",
        "  _describe -t commands 'memvault command' commands",
        "}",
        "",
        "_memvault() {",
        "  local curcontext=$curcontext state state_descr line ret=1",
        "  local -A opt_args",
        "  _arguments -C \\",
    ]
    for spec in _zsh_option_specs(cli.global_options):
        out.append(f"    {spec} \\")
    out += [
        "    '1:command:_memvault_commands' \\",
        "    '*:: :->args' && ret=0",
        "  case $state in",
        "    args)",
        "      local _memvault_vault_arg=${opt_args[--vault]}",
        "      curcontext=${curcontext%:*:*}:memvault-$words[1]:",
        "      case $words[1] in",
    ]
    for cmd in cli.commands:
        out.append(f"        {cmd.name})")
        out.append("          _arguments -s \\")
        specs = _zsh_option_specs(cmd.options) + _zsh_argument_specs(cmd.arguments)
        for spec in specs[:-1]:
            out.append(f"            {spec} \\")
        out.append(f"            {specs[-1]} && ret=0")
        out.append("          ;;")
    out += [
        "      esac",
        "      ;;",
        "  esac",
        "  return ret",
        "}",
        "",
        "if [[ $funcstack[1] == _memvault ]]; then",
        "  _memvault \"$@\"",
        "else",
        "  compdef _memvault memvault",
        "fi",
        "",
    ]
    return "\n".join(out)


# -- fish ---------------------------------------------------------------------------------------

def _fq(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_value(kind: str, choices: list[str]) -> str:
    return {
        "conversations": "-x -a '(__memvault_conversations)'",
        "ids": "-a '(__memvault_ids all)'",
        "live-ids": "-a '(__memvault_ids live)'",
        "files": "-r -F",
        "dirs": "-x -a '(__fish_complete_directories)'",
        "choices": "-x -a " + _fq(" ".join(choices)),
        "free": "-x",
        "none": "",
    }[kind]


def _fish_option(condition: str, opt: Opt) -> str:
    parts = ["complete -c memvault", f"-n {_fq(condition)}"]
    for name in opt.short:
        parts.append(f"-s {name[1:]}")
    for name in opt.long:
        parts.append(f"-l {name[2:]}")
    value = _fish_value(opt.complete, opt.choices)
    if value:
        parts.append(value)
    parts.append(f"-d {_fq(first_sentence(opt.help))}")
    return " ".join(parts)


def gen_fish(cli: Cli) -> str:
    global_valued = [o for opt in cli.global_options if opt.takes_value for o in opt.long]
    skip_cases = " ".join(global_valued) or "--"
    out = [
        "# fish completion for memvault.",
        "# Generated by tools/gendocs.py from the CLI definitions: do not edit by hand.",
        "# Install: see README.md, \"Shell completion and man page\".",
        "",
        "# The vault being completed: --vault on the command line, else $MEMVAULT_DIR, else the XDG default.",
        "function __memvault_vault",
        "    set -l tokens (commandline -opc)",
        "    set -l n (count $tokens)",
        "    for i in (seq 2 $n)",
        "        if test \"$tokens[$i]\" = --vault; and test $i -lt $n",
        "            string replace -r -- '^~' $HOME $tokens[(math $i + 1)]",
        "            return",
        "        end",
        "    end",
        "    if test -n \"$MEMVAULT_DIR\"",
        "        string replace -r -- '^~' $HOME $MEMVAULT_DIR",
        "    else if test -n \"$XDG_DATA_HOME\"",
        "        echo $XDG_DATA_HOME/memvault",
        "    else",
        "        echo $HOME/.local/share/memvault",
        "    end",
        "end",
        "",
        "# The command being completed, if one was typed (global options and their values skipped).",
        "function __memvault_command",
        "    set -l tokens (commandline -opc)",
        "    set -l skip 0",
        "    for t in $tokens[2..-1]",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $t",
        f"            case {skip_cases}",
        "                set skip 1",
        "            case '-*'",
        "            case '*'",
        "                echo $t",
        "                return 0",
        "        end",
        "    end",
        "    return 1",
        "end",
        "",
        "function __memvault_needs_command",
        "    not __memvault_command >/dev/null",
        "end",
        "",
        "function __memvault_using_command",
        "    set -l cmd (__memvault_command)",
        "    and test \"$cmd\" = $argv[1]",
        "end",
        "",
        "# Conversation folder names under entries/, hashed slugs left out (see memvault.bash).",
        "function __memvault_conversations",
        "    set -l root (__memvault_vault)",
        "    for d in $root/entries/*/",
        "        set -l name (string replace -r -- '/$' '' $d | string replace -r -- '^.*/' '')",
        "        string match -qr -- '-[0-9a-f]{10}$' $name; and continue",
        "        echo $name",
        "    end",
        "end",
        "",
        "# Memory ids from file names (<ts>__<uuid>.md); $argv[1] = all to include deleted memories.",
        "function __memvault_ids",
        "    set -l root (__memvault_vault)",
        "    for f in $root/entries/**__*.md",
        "        set -l rel (string replace -- \"$root/entries/\" '' $f)",
        "        if test \"$argv[1]\" != all; and string match -qr -- '^[^/]+/deleted/' $rel",
        "            continue",
        "        end",
        "        string replace -r -- '^.*__' '' $f | string replace -r -- '\\.md$' ''",
        "    end",
        "end",
        "",
        "complete -c memvault -f",
    ]
    for opt in cli.global_options:
        out.append(_fish_option("__memvault_needs_command", opt))
    out.append("complete -c memvault -s h -l help -d 'Show help and exit'")
    for cmd in cli.commands:
        out.append(f"complete -c memvault -n __memvault_needs_command -a {cmd.name} -d {_fq(first_sentence(cmd.short_help))}")
    for cmd in cli.commands:
        out.append("")
        condition = f"__memvault_using_command {cmd.name}"
        for opt in cmd.options:
            out.append(_fish_option(condition, opt))
        positional = next((a.complete for a in cmd.arguments if a.complete != "free"), None)
        if positional:
            out.append(f"complete -c memvault -n {_fq(condition)} {_fish_value(positional, [])}")
    out.append("")
    return "\n".join(out)


# -- man page -----------------------------------------------------------------------------------

_ROFF_CHARS = {
    "\u2014": "\\(em", "\u2013": "\\(en", "\u2026": "...", "\u2018": "\\(oq", "\u2019": "\\(cq",
    "\u201c": "\\(lq", "\u201d": "\\(rq", "\u2192": "\\(->", "\u2190": "\\(<-", "\u2264": "\\(<=",
    "\u2265": "\\(>=", "\u00d7": "\\(mu", "\u00a0": "\\ ",
}


def roff(text: str) -> str:
    """Plain text -> roff: backslashes, hyphens (\\-), and non-ASCII characters escaped."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    out = []
    for ch in text:
        if ch in _ROFF_CHARS:
            out.append(_ROFF_CHARS[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            ascii_form = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(ascii_form or "?")
    return "".join(out)


def roff_line(text: str) -> str:
    """A text line: a leading '.' or '\\'' would be read as a request."""
    line = roff(text)
    return "\\&" + line if line.startswith((".", "'")) else line


def _bold(text: str) -> str:
    return f"\\fB{roff(text)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{roff(text)}\\fR"


def _man_option(opt: Opt) -> list[str]:
    head = ", ".join(_bold(name) for name in opt.all)
    if opt.takes_value:
        head += " " + _italic(opt.metavar)
    body = [opt.help] if opt.help else []
    if opt.multiple and "repeatable" not in opt.help.lower():
        body.append("Repeatable.")
    if opt.default is not None:
        body.append(f"Default: {opt.default}.")
    return [".TP", head, roff_line(" ".join(body))]


def _synopsis(cmd: Cmd) -> str:
    parts = [f"\\fB{PROG} {roff(cmd.name)}\\fR"]
    if cmd.options:
        parts.append("[\\fIOPTIONS\\fR]")
    for arg in cmd.arguments:
        parts.append(roff(arg.metavar).replace(arg.name, f"\\fI{arg.name}\\fR", 1))
    return " ".join(parts)


FILES_TEXT = [
    ("<vault>/memvault.toml", "Optional settings for this vault (committed). Keys as in ENVIRONMENT, in "
                              "lower case: for example default_top_k = 8. API keys are refused here."),
    ("<vault>/entries/<conversation>/", "One folder per conversation (a filesystem-safe slug of its id; "
                                        "the default conversation is global), holding facts/, notes/, "
                                        "decisions/, turns/user/, turns/assistant/ and summaries/. Each memory "
                                        "is <ts>__<uuid>.md: YAML front matter (id, role, conversation_id, "
                                        "created_at, ...) and the text as the body."),
    ("<vault>/entries/<conversation>/deleted/", "Soft-deleted memories (tombstones with deleted_at and "
                                                "deleted_reason); nothing is ever unlinked."),
    ("<vault>/.memvault/", "The sidecar, never committed and safe to delete: index/ (the LanceDB index, "
                           "rebuilt from the files), state.db (what the index has read of each file), lock (inter-process lock), "
                           "edit/ (copies being edited) and rejected/ (edits that did not validate)."),
    ("<vault>/.git/", "The history: one commit per command that changed files."),
    ("~/.local/share/memvault", "The default vault ($XDG_DATA_HOME/memvault)."),
    ("~/.cache/memvault/fastembed", "Downloaded models ($XDG_CACHE_HOME/memvault/fastembed)."),
]

EXTRA_ENVIRONMENT = [
    ("MEMVAULT_DIR", "The vault folder, unless --vault is given. Default: $XDG_DATA_HOME/memvault, "
                     "that is ~/.local/share/memvault."),
    ("MEMVAULT_CACHE_DIR", "Where downloaded models are kept (fastembed/ inside it). "
                           "Default: $XDG_CACHE_HOME/memvault."),
    ("VISUAL, EDITOR", "The editor for memvault edit: $VISUAL, else $EDITOR, else vi. The value is split "
                       "like a shell would, so code -w works."),
    ("NO_COLOR", "When set and not empty: no colour and no progress bars. Neither is used either when "
                 "the output is not a terminal."),
]

EXAMPLES = [
    ("Store a note piped in, one memory per line:", "printf 'likes tea\\nwalks daily\\n' | memvault add --each-line"),
    ("The three best matches as JSON, texts only:", "memvault search -k 3 --json 'what does she drink' | jq -r '.[].text'"),
    ("A crontab line: every night, index and commit the files edited by hand; cron mails only errors:",
     "0 3 * * * memvault -q reindex > /dev/null"),
    ("Edit the files by hand, then bring the index up to date and commit:",
     "$EDITOR \"$MEMVAULT_DIR\"/entries/global/facts/*.md && memvault reindex"),
    ("Edit or remove one memory by a unique id prefix:", "memvault edit 3f2a1b && memvault rm 9c0d"),
    ("What changed, with the diffs:", "git -C \"$MEMVAULT_DIR\" log -p"),
]


def gen_man(cli: Cli) -> str:
    from memvault import __version__

    out = [
        ".\\\" Generated by tools/gendocs.py from the CLI definitions: do not edit by hand.",
        f".TH MEMVAULT 1 \"\" \"memvault {roff(__version__)}\" \"User Commands\"",
        ".nh",
        ".ad l",
        ".SH NAME",
        f"memvault \\- {roff(cli.help.rstrip('.').lower()[:1] + cli.help.rstrip('.')[1:])}",
        ".SH SYNOPSIS",
        ".B memvault",
    ]
    synopsis = []
    for opt in cli.global_options:
        piece = "|".join(_bold(n) for n in opt.all)
        if opt.takes_value:
            piece += " " + _italic(opt.metavar)
        synopsis.append(f"[{piece}]")
    out.append(" ".join(synopsis) + " \\fICOMMAND\\fR [\\fIARGS\\fR]")
    for cmd in cli.commands:
        out += [".br", _synopsis(cmd)]
    out += [
        ".SH DESCRIPTION",
        roff_line("memvault keeps long-term memories for LLM work as plain markdown files with YAML front "
                  "matter, in a folder that is a git repository (the vault). A LanceDB index in the vault's "
                  ".memvault/ folder makes them searchable; it is rebuilt from the files whenever needed."),
        ".PP",
        roff_line("Search runs the whole read path in one process: dense and BM25 retrieval fused by "
                  "reciprocal rank fusion, a cross-encoder rerank, a recency weight and a diversity (MMR) pick. "
                  "Every change is a git commit; deletes are moves to deleted/, never unlinks. Nothing reaches "
                  "the network unless an LLM is configured or a model download is asked for."),
        ".PP",
        roff_line("Results go to standard output; notices, progress and errors go to standard error. "
                  "With --json, standard output holds JSON and nothing else; -q leaves only "
                  "results and errors. IDs may be shortened to any unique prefix of at least 4 characters, "
                  "as in git."),
        ".SH OPTIONS",
        roff_line("These go before the command."),
    ]
    for opt in cli.global_options:
        out += _man_option(opt)
    out += [".TP", f"{_bold('-h')}, {_bold('--help')}", roff_line("Show help and exit (after a command: "
                                                                  "that command's help).")]
    out.append(".SH COMMANDS")
    for cmd in cli.commands:
        title = f"{PROG} {cmd.name}" + (" [OPTIONS]" if cmd.options else "") + \
            (" " + cmd.synopsis_args if cmd.arguments else "")
        out.append(f".SS \"{roff(title)}\"")
        for index, paragraph in enumerate(cmd.help.split("\n\n")):
            if index:
                out.append(".PP")
            out.append(roff_line(paragraph))
        for arg in cmd.arguments:
            if arg.help:
                out += [".TP", _italic(arg.name), roff_line(arg.help)]
        for opt in cmd.options:
            out += _man_option(opt)
    out += [
        ".SH ENVIRONMENT",
        roff_line("Settings come from defaults, then the vault's memvault.toml, then MEMVAULT_<KEY> "
                  "variables, then command-line options; later ones win. Each setting, with its default:"),
    ]
    for name, default, text in settings_rows():
        out += [".TP", f"\\fBMEMVAULT_{roff(name.upper())}\\fR (\\fI{roff(name)}\\fR, default: {roff(default)})",
                roff_line(text)]
    for name, text in EXTRA_ENVIRONMENT:
        out += [".TP", _bold(name), roff_line(text)]
    out.append(".SH FILES")
    for path, text in FILES_TEXT:
        out += [".TP", _italic(path), roff_line(text)]
    out += [
        ".SH EXIT STATUS",
        ".TP", _bold("0"), roff_line("Success."),
        ".TP", _bold("1"), roff_line("Failure: the reason is one line on standard error (also reindex "
                                     "--check when the index is out of date)."),
        ".TP", _bold("2"), roff_line("Usage error: a bad option, argument, setting or conversation id."),
        ".SH EXAMPLES",
    ]
    for index, (text, command) in enumerate(EXAMPLES):
        if index:
            out.append(".PP")
        out += [roff_line(text), ".PP", ".RS 4", ".nf", roff_line(command), ".fi", ".RE"]
    out += [
        ".SH SEE ALSO",
        "\\fBgit\\fR(1), \\fBjq\\fR(1), \\fBcrontab\\fR(5).",
        roff_line("README.md in the source tree explains set-up, models and the LLM."),
        "",
    ]
    return "\n".join(out)


# -- main ---------------------------------------------------------------------------------------

def outputs() -> dict[Path, str]:
    cli = load_cli()
    return {BASH: gen_bash(cli), ZSH: gen_zsh(cli), FISH: gen_fish(cli), MAN: gen_man(cli)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        rel = path.relative_to(REPO)
        if args.check:
            stale.append(rel)
            diff = difflib.unified_diff((current or "").splitlines(), text.splitlines(),
                                        f"{rel} (in the repo)", f"{rel} (from the CLI)", lineterm="", n=1)
            sys.stderr.write("\n".join(list(diff)[:40]) + "\n")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    if stale:
        sys.stderr.write(f"out of date: {', '.join(map(str, stale))}; run `python tools/gendocs.py`\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
