"""Errors the user sees: each carries one line that says what is wrong and where; and the one table of
what each face answers to each (ERROR_TABLE, answer_for)."""

from __future__ import annotations


class MemvaultError(Exception):
    """A failure the user must know about: printed as one line, exit code 1."""

    exit_code = 1


class UsageError(MemvaultError):
    """Bad arguments or settings: exit code 2, like a usage error.

    The message names the library's own parameters (`since`, `created_at`); `params` lists the
    ones it names, so that a face can put its own name for each (the CLI: `--since`)."""

    exit_code = 2

    def __init__(self, message: str = "", params: str | tuple[str, ...] = ()):
        super().__init__(message)
        self.params = (params,) if isinstance(params, str) else tuple(params)


class SettingsError(UsageError):
    """A setting in memvault.toml, the environment or a flag is invalid."""


class InvalidConversationId(UsageError):
    """A conversation id that cannot safely become a folder name."""


class MemoryFileError(MemvaultError):
    """A memory file that cannot be read; names the file and the reason."""

    def __init__(self, path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class NotFound(MemvaultError):
    """No memory matches an id or prefix."""


class NothingGiven(MemvaultError):
    """Input that holds nothing (an empty text to add or send): exit 1 in the CLI, 400 naming the
    parameter (`params`) in serve."""

    def __init__(self, message: str = "", params: str | tuple[str, ...] = ()):
        super().__init__(message)
        self.params = (params,) if isinstance(params, str) else tuple(params)


class AlreadyDeleted(MemvaultError):
    """The memory asked for is a tombstone: deleted already (a removal or edit of it has nothing to do)."""


class EditConflict(MemvaultError):
    """An edit written over a text the memory no longer holds (changed by hand or by another command since
    it was read): names the file; nothing was written."""


class LockTimeout(MemvaultError):
    """Another memvault process held the vault lock for too long."""


class LLMError(MemvaultError):
    """The LLM endpoint could not be used, or its answers stayed unusable; str() is one line
    naming the endpoint and the setting to change (never the API key). status: the HTTP status
    the endpoint answered with, when it answered with an error."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class UpstreamAnswered(LLMError):
    """A proxy's upstream answered the client's request with an error (an error status, or an error
    event mid-stream): what it sent, kept as it came (`body`: the response's body or the event's bytes;
    `content_type`; `headers`: those a client reads, retry-after and the like), so that a face that
    hands the upstream's answers on as they came hands this one on too (serve's Anthropic face). Its
    one line is an LLMError's, and the table answers it as one for every other face."""

    def __init__(self, message: str, status: int | None = None, body: bytes = b"",
                 content_type: str = "application/json", headers: dict | None = None, event: bool = False):
        super().__init__(message, status=status)
        self.body, self.content_type, self.headers, self.event = body, content_type, dict(headers or {}), event


class LLMTimeout(LLMError):
    """The LLM endpoint did not answer within llm_timeout."""


class LLMNoValidAnswer(LLMError):
    """The LLM answered, but not in the shape asked for, even after a retry (model garbage)."""


class VaultStateError(MemvaultError):
    """The vault's git repository is in a state where memvault must not write (a merge in
    progress, a detached HEAD, git missing); the message says what to run."""


def validation_problem(error) -> str:
    """A pydantic ValidationError as one sentence naming each argument or field (the MCP tools' and
    `serve`'s bad input)."""
    import json

    parts = []
    for problem in error.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "the arguments"
        if problem["type"] == "missing":
            parts.append(f"{where} is required")
        elif problem["type"] == "extra_forbidden":
            parts.append(f"{where}: unknown field")
        else:
            message = problem["msg"][:1].lower() + problem["msg"][1:]
            parts.append(f"{where}: {message} (got {json.dumps(problem.get('input'), default=str)[:80]})")
    return "; ".join(parts)


class RemoteError(MemvaultError):
    """A git remote that could not be used (none configured, unreachable, refusing the credentials,
    rejecting a push); the message says which, what to do, and that nothing was lost here.
    `result`: what the sync had done before it stopped, if anything."""

    def __init__(self, message: str, kind: str = "failed", result=None):
        super().__init__(message)
        self.kind = kind  # no-remote, unreachable, auth, rejected, failed
        self.result = result


class SecretsFound(RemoteError):
    """sync did not push: the commits to push hold secrets (API keys, passwords); `findings` names each
    file and line (scrub.HistoryFinding), never the value."""

    def __init__(self, message: str, findings=(), result=None):
        super().__init__(message, kind="secrets", result=result)
        self.findings = list(findings)


class SyncConflict(MemvaultError):
    """What a sync does not settle by itself (a file outside entries/ changed on both sides, a file
    changed by hand and not committed that the remote changed too): names the file; nothing was
    changed."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result


class IndexUnreadable(MemvaultError):
    """The LanceDB index under .memvault/ could not be read (files gone or damaged under it); the
    files are the truth, and `memvault reindex` rebuilds it from them."""


class GitFailed(MemvaultError):
    """A git command memvault ran failed in a way it does not handle itself; names the command and
    git's own words."""


def as_memvault_error(exc: BaseException) -> MemvaultError | None:
    """A failure of a library memvault stands on in memvault's words, or None when it is none of
    those: LanceDB's RuntimeError ("lance error: ...") and GitPython's GitCommandError. The one
    translation every face uses (CLI, serve, MCP), so each says the same words."""
    if isinstance(exc, MemvaultError):
        return exc
    if isinstance(exc, RuntimeError) and "lance error" in str(exc).lower():
        import re

        detail = re.sub(r",\s*\S+\.rs:\d+:\d+\s*$", "", " ".join(str(exc).split()))
        return IndexUnreadable(f"the index under .memvault/ is unreadable ({detail}); `memvault reindex` repairs it")
    if type(exc).__name__ == "GitCommandError":  # GitPython's; not imported here (it costs ~40 ms)
        command = " ".join(str(part) for part in (getattr(exc, "command", None) or ["git"])[:3])
        said = " ".join(str(getattr(exc, "stderr", "") or "").split()).removeprefix("stderr:").strip(" '")
        return GitFailed(f"`{command}` failed: {said[:300] or 'no message'}")
    return None


def for_client(message: str, root) -> str:
    """A message for the client of a server (serve, mcp), which runs elsewhere: the vault's place on the
    server's disk left out, a file under it named by its path in the vault, the folder itself "the
    vault" ("no memory with id 'x' in /srv/me/vault" -> "... in the vault")."""
    if root is None:
        return message
    place = str(root).rstrip("/")
    return message.replace(place + "/", "").replace(place, "the vault") if place else message


# -- what each face makes of a failure ---------------------------------------------------------------
#
# One table, read by every face (docs/design.md, "Layers"): the CLI's exit code, serve's HTTP status,
# OpenAI's error `type` and `code`, Anthropic's error `type` (serve's Messages face), whether a client's
# retry can help; MCP's error result is the message itself. A face that speaks another protocol adds its column here (a field of Answer and a value in
# each row), and reads it through `answer_for`.

class Answer:
    """What the faces answer to one class of failure (a plain class: `import memvault` loads this
    module, and dataclasses would cost it ~10 ms)."""

    __slots__ = ("exit_code", "status", "openai_type", "code", "retry", "anthropic_type")

    def __init__(self, exit_code: int = 1, status: int = 500, openai_type: str = "server_error",
                 code: str | None = None, retry: bool | None = None, anthropic_type: str = "api_error"):
        self.exit_code = exit_code  # the CLI's
        self.status = status  # HTTP
        self.openai_type = openai_type  # OpenAI's error `type`
        self.code = code  # OpenAI's error `code` (also a stable name for the failure)
        self.retry = retry  # False: no retry can mend it (serve's x-should-retry: false)
        self.anthropic_type = anthropic_type  # Anthropic's error `type` (serve's /v1/messages)

    def __repr__(self) -> str:
        return f"Answer({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"


class Row:
    """One line of the table: failures of `error` (for which `when` holds, if given) get `answer`."""

    __slots__ = ("error", "answer", "when")

    def __init__(self, error: type, answer: Answer, when=None):
        self.error, self.answer, self.when = error, answer, when


_REFUSED = "invalid_request_error"

_BAD = "invalid_request_error"  # Anthropic's word for it too

ERROR_TABLE: tuple[Row, ...] = (
    #   the failure                               exit  HTTP  OpenAI type           code                    retry  Anthropic type
    Row(IndexUnreadable,          Answer(1,    503,  "server_error",       "index_unreadable",     None,  "api_error")),
    Row(AlreadyDeleted,           Answer(1,    409,  _REFUSED,             "memory_deleted",       None,  _BAD)),
    Row(EditConflict,             Answer(1,    409,  _REFUSED,             "edit_conflict",        None,  _BAD)),
    Row(NotFound,                 Answer(1,    404,  "not_found_error",    "memory_not_found",     None,  "not_found_error")),
    Row(LLMTimeout,               Answer(1,    504,  "upstream_error",     "upstream_timeout",     False, "timeout_error")),
    Row(LLMError,                 Answer(1,    400,  _REFUSED,             "upstream_refused",     None,  _BAD),
        when=lambda e: getattr(e, "status", None) in (400, 422)),  # the upstream refused the client's options
    Row(LLMError,                 Answer(1,    502,  "upstream_error",     "upstream_unavailable", None,  "api_error"),
        when=lambda e: (getattr(e, "status", None) or 0) >= 500),  # a failed upstream may mend
    Row(LLMError,                 Answer(1,    502,  "upstream_error",     "upstream_unavailable", False, "api_error")),
    Row(UsageError,               Answer(2,    400,  _REFUSED,             None,                   None,  _BAD)),
    Row(NothingGiven,             Answer(1,    400,  _REFUSED,             None,                   None,  _BAD)),
    Row(LockTimeout,              Answer(1,    503,  "server_error",       "vault_busy",           None,  "overloaded_error")),
    Row(VaultStateError,          Answer(1,    409,  "server_error",       "vault_state",          None,  "api_error")),
    Row(MemvaultError,            Answer(1,    500,  "server_error")),
    Row(OSError,                  Answer(1,    500,  "server_error")),  # the system said no: disk, permissions
)
UNEXPECTED = Answer(1, 500, "server_error")  # a bug: the CLI shows its traceback, serve logs it


class Failure:
    """A failure as every face says it: `message`, its one line; `params`, the parameters it names
    (`param`: the last, serve's error `param`); `answer`, the table's; `expected`, False for a bug."""

    __slots__ = ("message", "answer", "params", "expected")

    def __init__(self, message: str, answer: Answer, params: tuple[str, ...] = (), expected: bool = True):
        self.message, self.answer, self.params, self.expected = message, answer, params, expected

    @property
    def param(self) -> str | None:
        return self.params[-1] if self.params else None


def answer_for(exc: BaseException) -> Failure:
    """The one mapping of a failure (any exception) to what the faces say: LanceDB's and git's in
    memvault's words (as_memvault_error), an OSError naming its file, anything else an internal error."""
    failure = as_memvault_error(exc) or exc
    for row in ERROR_TABLE:
        if isinstance(failure, row.error) and (row.when is None or row.when(failure)):
            break
    else:
        return Failure(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", UNEXPECTED,
                       expected=False)
    if isinstance(failure, OSError) and not isinstance(failure, MemvaultError):
        where = f"{failure.filename}: " if getattr(failure, "filename", None) else ""
        message = f"{where}{failure.strerror or failure}"
    else:
        message = str(failure)
    return Failure(message, row.answer, tuple(getattr(failure, "params", ()) or ()))
