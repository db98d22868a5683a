"""The request definitions (memvault/request_options.py) as pydantic types: serve's request bodies and
query models, and the MCP tools' parameters, built at import from the one definition.

    SearchBody = model_for(SEARCH, "serve", "SearchBody")      # a pydantic model, unknown fields refused
    parameters(SEARCH, "mcp")                                   # [inspect.Parameter], Annotated with Field

A face that speaks JSON (a new one too) takes its shapes from here; the CLI builds its typer options
from the same definitions (faces/cli_options.py), without pydantic, which `--help` would pay for.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from memvault.request_options import Option, Request


def annotation(option: Option) -> Any:
    """The option's type as pydantic reads it: a choice a Literal, many a list, no default Optional."""
    kind: Any = Literal[option.choices] if option.choices else option.type  # type: ignore[valid-type]
    if option.type is dict:
        kind = dict[str, Any]
    if option.many:
        kind = list[kind]
    if option.default is None and not option.required and not option.many:  # a list: empty when not given
        kind = kind | None
    return kind


def field(option: Option) -> tuple[Any, Any]:
    """(annotation, pydantic Field) of one option: its bounds, help words and default."""
    bounds = {k: v for k, v in (("ge", option.ge), ("le", option.le)) if v is not None}
    if option.required:
        default: Any = ...
    elif option.many and option.default is None:
        return annotation(option), Field(default_factory=list, description=option.help or None, **bounds)
    else:
        default = option.default
    return annotation(option), Field(default, description=option.help or None, **bounds)


def model_for(request: Request, face: str, name: str, *, leave: tuple[str, ...] = (),
              own: dict[str, tuple[Any, Any]] | None = None, doc: str | None = None) -> type[BaseModel]:
    """A pydantic model of what `face` takes of the request (in its names), unknown fields refused:
    a request body or a query. leave: options the face takes elsewhere (a path parameter). own: the
    face's own fields, (annotation, Field)."""
    fields = {mine.name: field(mine) for _, mine in request.at(face) if mine.name not in leave}
    fields.update(own or {})
    model = create_model(name, __config__=ConfigDict(extra="forbid"), __doc__=doc, **fields)
    model.request = request  # type: ignore[attr-defined]  (which definition it was built from)
    return model


def parameters(request: Request, face: str, own: dict[str, tuple[Any, Any]] | None = None) -> list[inspect.Parameter]:
    """The request as keyword parameters of a function (an MCP tool's), each Annotated with its Field:
    the SDK reads the tool's input schema from them."""
    found = []
    for _, mine in request.at(face):
        kind, info = field(mine)
        found.append((mine.name, kind, info))
    found += [(name, kind, info) for name, (kind, info) in (own or {}).items()]
    made = []
    for name, kind, info in found:
        default = info.get_default(call_default_factory=True) if not info.is_required() else inspect.Parameter.empty
        made.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                      annotation=Annotated[kind, Field(description=info.description,
                                                                       **_bounds(info))]))
    # Required ones first: a signature has its parameters without defaults before those with one.
    return sorted(made, key=lambda p: p.default is not inspect.Parameter.empty)


def _bounds(info) -> dict[str, Any]:
    bounds = {}
    for constraint in info.metadata:
        for key in ("ge", "le"):
            if getattr(constraint, key, None) is not None:
                bounds[key] = getattr(constraint, key)
    return bounds


def query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    """A query model's fields as OpenAPI parameters (serve reads a query itself, to answer a bad one in
    its own error shape; this is what its schema says)."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    return [{"name": name, "in": "query", "required": name in required, "schema": prop,
             **({"description": prop["description"]} if "description" in prop else {})}
            for name, prop in schema["properties"].items()]


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A body model as an OpenAPI requestBody (serve reads the body itself, for the same reason)."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}
