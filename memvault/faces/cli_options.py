"""The request definitions (memvault/request_options.py) as the CLI's typer options, built at import.

    @app.command()
    @takes(SEARCH)
    def search(ctx: typer.Context, asked: dict, explain: bool = typer.Option(...), ...):
        vault.search(**asked)

`takes` gives the command every option the definition offers the CLI (its flags, type, bounds, default
and help words), after the command's own arguments and before its own options, and hands the command
`asked`: the values given, in the library's names, ready for the call (a value not given is left out:
the library's default applies). An option added to the definition is on the command line, in
`--help`, the man page and the completions at once.
"""

from __future__ import annotations

import functools
import inspect
from enum import Enum
from typing import Any, Callable, Optional

import typer

from memvault.faces.completion import complete_conversation, complete_live_memory_id, complete_memory_id
from memvault.request_options import Option, Request

COMPLETIONS = {"conversation": complete_conversation, "memory": complete_memory_id,
               "live_memory": complete_live_memory_id}
_CHOICES: dict[tuple[str, tuple[str, ...]], type[Enum]] = {}


def choice_type(name: str, choices: tuple[str, ...]) -> type[Enum]:
    """An Enum of the choices (typer offers them in --help and completion); one per set of choices."""
    key = (name, choices)
    if key not in _CHOICES:
        _CHOICES[key] = Enum(name.title().replace("_", ""), {c: c for c in choices}, type=str)  # type: ignore[misc]
    return _CHOICES[key]


def flags(option: Option) -> tuple[str, ...]:
    return option.flags or ("--" + option.name.replace("_", "-"),)


def parameter(option: Option) -> inspect.Parameter:
    """One typer parameter (an Option, or an Argument for a positional one) for the option."""
    kind: Any = choice_type(option.name, option.choices) if option.choices else option.type
    if option.many:
        kind = list[kind]  # type: ignore[valid-type]
    is_flag = option.type is bool and not option.many
    default = option.default
    if option.negate:
        default = False  # `--no-rerank`: the flag says the opposite of the library's option
    elif option.choices and default is not None:
        default = kind(default) if not option.many else default
    if not is_flag and (default is None or option.many):
        kind = Optional[kind]
    more: dict[str, Any] = {"help": option.negate or option.help}
    if option.metavar and not is_flag:
        more["metavar"] = option.metavar
    if option.complete:
        more["autocompletion"] = COMPLETIONS[option.complete]
    if option.argument:
        info = typer.Argument(... if option.required else default, **more)
    else:
        if option.ge is not None:
            more["min"] = option.ge
        if option.le is not None:
            more["max"] = option.le
        info = typer.Option(default if not option.many else None, *flags(option), **more)
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


def takes(request: Request) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The command with the request's options (see the module's doc). The command's signature: `ctx`,
    its own arguments, then the definition's, then its own options; it takes `asked` for the values."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for name, p in signature.parameters.items() if name != "asked"]
        offered = [mine for _, mine in request.at("cli")]
        names = {mine.name for mine in offered}
        clash = names & {p.name for p in own}
        assert not clash, f"{command.__name__} declares {clash} itself: the definition has it"
        mine = [parameter(o) for o in offered]
        positional = [p for p in own if isinstance(p.default, typer.models.ArgumentInfo) or p.name == "ctx"]
        rest = [p for p in own if p not in positional]
        mine.sort(key=lambda p: not isinstance(p.default, typer.models.ArgumentInfo))
        arguments = [p for p in mine if isinstance(p.default, typer.models.ArgumentInfo)]
        options = [p for p in mine if p not in arguments]
        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                      for p in positional + arguments + options + rest]

        @functools.wraps(command)
        def run(**values: Any) -> Any:
            asked = request.library_args("cli", {name: values.pop(name) for name in names})
            return command(asked=asked, **values)

        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        return run

    return wrap
