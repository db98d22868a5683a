"""Settings: defaults < memvault.toml in the vault < MEMVAULT_* environment < flags.

Every setting lives here with its type and bounds, so a bad value
anywhere is reported with the key and where it came from.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from memvault.errors import SettingsError

DEFAULT_EMBEDDING_MODEL = "memvault/all-MiniLM-L6-v2-int8"  # bundled, loads offline
DEFAULT_RERANKER_MODEL = "Xenova/ms-marco-MiniLM-L-6-v2"
SETTINGS_FILE = "memvault.toml"
ENV_PREFIX = "MEMVAULT_"


@dataclass(frozen=True)
class Settings:
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    reranker_model: str = DEFAULT_RERANKER_MODEL
    llm_model: str = "openai/qwen3:4b"
    llm_base_url: str = "http://localhost:11434/v1"
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout: float = 120.0
    llm_temperature: float = 0.0
    default_top_k: int = 5
    max_entries: int = 500
    mmr_lambda: float = 0.7
    recency_weight: float = 0.2
    score_threshold: float | None = None
    relevance_floor: float = 0.15
    session_weight: float = 0.4
    llm_rerank: bool = False
    llm_query_parts: bool = False
    enable_summarization: bool = True
    enable_git_versioning: bool = True
    soft_decay_minutes: float = 10.0
    hard_decay_minutes: float = 30.0
    max_session_tokens: int = 8000
    reconcile_mode: str = "pairs"
    extraction_mode: str = "message"
    learned_review: bool = False
    lock_timeout: float = 600.0
    # Withhold API keys, passwords and tokens at the door, keep learning off them, refuse to push them
    # (memvault/store/secret_scan.py). Off: stored, learned and pushed as said (docs/design.md, "Secrets").
    secret_scan: bool = True
    serve_api_key: str | None = field(default=None, repr=False)
    # serve's Anthropic Messages face (POST /v1/messages) hands its requests to this endpoint, as they came
    # (docs/design.md section 11); the key goes as x-api-key when the client sends no credentials of its own.
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str | None = field(default=None, repr=False)
    # Where /v1/messages goes: "anthropic" (anthropic_base_url, the request as it came) or "litellm" (the
    # LLM of llm_model / llm_base_url, any provider litellm reaches, the request translated by litellm).
    anthropic_upstream: str = "anthropic"
    # The CLI's warm path (memvault/faces/warm.py, docs/design.md section 19): off, use (an agent that
    # runs carries the command out), auto (also start one in the background, which exits after
    # agent_idle_minutes without a request). use by default: no resident process nobody asked for.
    agent: str = "use"
    agent_idle_minutes: float = 10.0
    # A model the settings name that is not in the cache (the reranker) is fetched the first time it is
    # needed, with progress; off: only `memvault models --download` fetches (store/models.py).
    fetch_models: bool = True
    # Let a vault's first write go into a git repository that already tracks other files (a project's
    # code): memvault would commit every memory into that project's history (store/vault.py).
    share_repository: bool = False
    # A coding agent's hooks (`memvault hook`, memvault/faces/hooks.py): the hard time limit of one hook
    # call, the tokens a session's start is given, and which conversation a project's folder is
    # (pairs of a folder and a conversation id; a folder not named is its own conversation).
    hook_timeout: float = 2.0
    hook_context_tokens: int = 1000
    project_conversations: tuple = ()

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)


# Keys that must never be written to memvault.toml, which is committed to git.
SECRET_KEYS = {"llm_api_key", "serve_api_key", "anthropic_api_key"}

# (low, high) inclusive bounds for numeric keys; None means unbounded.
BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "llm_timeout": (0.1, None),
    "llm_temperature": (0.0, 2.0),
    "default_top_k": (1, 1000),
    "max_entries": (1, None),
    "mmr_lambda": (0.0, 1.0),
    "recency_weight": (0.0, 1.0),
    "score_threshold": (0.0, 1.0),
    "relevance_floor": (0.0, 1.0),
    "session_weight": (0.0, 1.0),
    "soft_decay_minutes": (0.0, None),
    "hard_decay_minutes": (0.0, None),
    "max_session_tokens": (100, None),
    "lock_timeout": (1.0, None),
    "agent_idle_minutes": (0.01, None),
    "hook_timeout": (0.1, None),
    "hook_context_tokens": (0, None),
}

# Allowed values of string keys that are a choice.
CHOICES: dict[str, tuple[str, ...]] = {
    "reconcile_mode": ("pairs", "list"),
    "extraction_mode": ("message", "predict-calibrate"),
    "agent": ("off", "use", "auto"),
    "anthropic_upstream": ("anthropic", "litellm"),
}

FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


# Settings that are a table (memvault.toml: `[project_conversations]`, "folder" = "conversation"; the
# environment: a JSON object), kept as sorted (key, value) pairs of strings.
TABLES = {"project_conversations"}


def _base_type(name: str) -> type:
    if name in TABLES:
        return tuple
    annotation = str(FIELDS[name].type)
    for kind in (bool, int, float, str):
        if annotation.startswith(kind.__name__):
            return kind
    raise AssertionError(f"unhandled settings type for {name}: {annotation}")


def _optional(name: str) -> bool:
    return "None" in str(FIELDS[name].type)


def coerce(name: str, value: Any, origin: str, param: str | None = None) -> Any:
    """Turn a raw value (TOML value or environment string) into the key's type, or fail clearly.
    param: the argument the value came in by, when it came by one (a face names it its own way)."""
    try:
        return _coerce(name, value, origin)
    except SettingsError as exc:
        if param is None:
            raise
        raise SettingsError(str(exc), params=param) from None


def _coerce(name: str, value: Any, origin: str) -> Any:
    if name not in FIELDS:
        known = ", ".join(sorted(FIELDS))
        raise SettingsError(f"unknown setting '{name}' in {origin} (known: {known})")
    kind = _base_type(name)
    bad = f"invalid value {value!r} for setting '{name}' in {origin}"
    if kind is tuple:
        return _table(value, bad)
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        if _optional(name):
            return None
        if kind is str and value == "":
            raise SettingsError(f"{bad}: must not be empty")
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{bad}: expected true or false")
    if kind in (int, float):
        if isinstance(value, bool):
            raise SettingsError(f"{bad}: expected a number")
        try:
            number = kind(value) if kind is float or isinstance(value, int) else int(str(value).strip())
        except (TypeError, ValueError):
            raise SettingsError(f"{bad}: expected {'an integer' if kind is int else 'a number'}") from None
        low, high = BOUNDS.get(name, (None, None))
        if (low is not None and number < low) or (high is not None and number > high):
            span = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise SettingsError(f"{bad}: must be {span}")
        return number
    if not isinstance(value, str):
        raise SettingsError(f"{bad}: expected a string")
    if name in CHOICES and value not in CHOICES[name]:
        raise SettingsError(f"{bad}: expected one of {', '.join(CHOICES[name])}")
    return value


def _table(value: Any, bad: str) -> tuple:
    """A table setting from TOML (a mapping) or the environment (a JSON object): sorted pairs of strings."""
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise SettingsError(f"{bad}: expected a JSON object of strings") from None
    if isinstance(value, (tuple, list)) and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in value):
        value = dict(value)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) and k and v
                                                 for k, v in value.items()):
        raise SettingsError(f"{bad}: expected a table of non-empty strings")
    return tuple(sorted(value.items()))


def read_settings_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: not valid TOML ({exc})") from None
    # Allow an optional [memvault] table as well as top-level keys.
    if isinstance(data.get("memvault"), dict):
        data = {**{k: v for k, v in data.items() if k != "memvault"}, **data["memvault"]}
    for key in data:
        if key in SECRET_KEYS:
            raise SettingsError(
                f"{path}: '{key}' must not be stored in {SETTINGS_FILE} (it is committed to git); "
                f"set {ENV_PREFIX}{key.upper()} instead"
            )
    return data


def load_settings(
    vault_root: Path | None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Merge defaults, the vault's memvault.toml, MEMVAULT_* variables and explicit overrides."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    if vault_root is not None:
        path = vault_root / SETTINGS_FILE
        if path.is_file():
            for key, raw in read_settings_file(path).items():
                values[key] = coerce(key, raw, str(path))
    for name in FIELDS:
        env_key = ENV_PREFIX + name.upper()
        if env_key in environ:
            values[name] = coerce(name, environ[env_key], f"environment variable {env_key}")
    for name, raw in (overrides or {}).items():
        if raw is not None:
            values[name] = coerce(name, raw, f"option {name}", param=name)
    settings = Settings(**values)
    if settings.hard_decay_minutes < settings.soft_decay_minutes:
        raise SettingsError(
            "setting 'hard_decay_minutes' must be at least 'soft_decay_minutes' "
            f"({settings.hard_decay_minutes} < {settings.soft_decay_minutes})"
        )
    return settings


def default_vault_path(environ: Mapping[str, str] | None = None) -> Path:
    """--vault > MEMVAULT_DIR > $XDG_DATA_HOME/memvault (~/.local/share/memvault)."""
    environ = os.environ if environ is None else environ
    if environ.get("MEMVAULT_DIR"):
        return Path(environ["MEMVAULT_DIR"]).expanduser()
    data_home = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "memvault"
