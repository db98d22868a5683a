"""Memories from the user's own words, stored as they are (`add`, `add --jsonl`, an import): the
input checked and made into memories, the ones a live memory already holds word for word set apart
(duplicates), and `store`, the one write of many memories in one commit. The other way in is
learning (learning/learn.py): facts the LLM finds in what the user said, reconciled with what is known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
import re
from typing import Any, Callable, Iterable, Iterator

from memvault.store import files
from memvault.errors import MemvaultError, UsageError
from memvault.store.files import Memory
from memvault.store.vault import Change, Vault

_LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
JSONL_KEYS = {"text", "conversation_id", "created_at", "kind", "role", "tags", "source", "rationale", "alternatives",
              "meta"}
# A JSON line with `role` is a chat turn: what the user said or what the assistant answered.
TURN_ROLES = ("user", "assistant")


def split_lines(text: str) -> list[str]:
    """One memory per non-empty line, markdown list markers stripped."""
    lines = (_LIST_MARKER.sub("", line, count=1).strip() for line in text.splitlines())
    return [line for line in lines if line]


def extra_fields(kind: str, tags: Iterable[str] | None = None, source: str | None = None,
                 rationale: str | None = None, alternatives: Iterable[str] | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    tag_list = [str(t).strip() for t in (tags or []) if str(t).strip()]
    if tag_list:
        extra["tags"] = tag_list
    if source:
        extra["source"] = source
    if rationale:
        extra["rationale"] = rationale
    alternative_list = [str(a) for a in (alternatives or []) if str(a).strip()]
    if alternative_list:
        extra["alternatives"] = alternative_list
    return extra


def role_for_kind(kind: str) -> str:
    try:
        return files.KIND_TO_ROLE[kind]
    except KeyError:
        raise UsageError(f"unknown kind {kind!r} (one of {', '.join(files.KIND_TO_ROLE)})") from None


def check_jsonl(text: str, origin: str, defaults: dict[str, Any]) -> tuple[int, int]:
    """Check every line (UsageError naming the first bad one) before anything is written; returns
    how many memories the text holds, and how many of them are chat turns. The memories are made
    again by iter_jsonl as they are written, so that a 100,000-line add never holds them all."""
    count = turns = 0
    for memory in iter_jsonl(text, origin, defaults):
        count += 1
        turns += memory.role in TURN_ROLES
    return count, turns


def parse_jsonl(text: str, origin: str, defaults: dict[str, Any]) -> list[Memory]:
    """One JSON object per line -> memories. Validates everything before anything is written."""
    return list(iter_jsonl(text, origin, defaults))


def iter_jsonl(text: str, origin: str, defaults: dict[str, Any]) -> Iterator[Memory]:
    """One JSON object per line -> memories, one at a time (UsageError at the first bad line)."""
    for number, line in enumerate(_lines(text), 1):
        if not line.strip():
            continue
        where = f"{origin} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise UsageError(f"{where}: expected a JSON object, got {type(item).__name__}")
        unknown = sorted(set(item) - JSONL_KEYS)
        if unknown:
            raise UsageError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(JSONL_KEYS))})")
        text_value = item.get("text")
        if not isinstance(text_value, str) or not text_value.strip():
            raise UsageError(f"{where}: 'text' must be a non-empty string")
        meta = item.get("meta") or {}
        if not isinstance(meta, dict):
            raise UsageError(f"{where}: 'meta' must be an object")
        clash = sorted(set(meta) & set(files.CORE_KEYS))
        if clash:
            raise UsageError(f"{where}: 'meta' may not set {clash[0]!r}")
        tags = item.get("tags", defaults.get("tags"))
        if isinstance(tags, str):
            tags = [tags]
        kind = item.get("kind") or defaults.get("kind", "fact")
        role = item.get("role")
        if role is not None and role not in TURN_ROLES:
            raise UsageError(f"{where}: 'role' must be user or assistant (a chat turn), not {role!r}")
        if role is not None and item.get("kind"):
            raise UsageError(f"{where}: give 'kind' or 'role' (a chat turn), not both")
        try:
            created = files.parse_time(item["created_at"], "created_at") if item.get("created_at") else None
            extra = extra_fields(kind, tags, item.get("source", defaults.get("source")),
                                 item.get("rationale", defaults.get("rationale")),
                                 item.get("alternatives", defaults.get("alternatives")))
            if role is not None:
                extra[files.ORIGIN_KEY] = "import"  # a turn memvault did not see happen: never evicted
            extra.update(meta)
            memory = files.new_memory(text_value, role or role_for_kind(kind),
                                      str(item.get("conversation_id") or defaults.get("conversation_id")
                                          or files.DEFAULT_CONVERSATION),
                                      created_at=created, extra=extra)
        except (ValueError, MemvaultError) as exc:
            raise UsageError(f"{where}: {exc}") from None
        yield memory


def _lines(text: str) -> Iterator[str]:
    """The lines of a text one at a time (no list of 100,000 of them), split at newlines only: a JSON
    string may hold U+2028 or U+0085 as it is, which str.splitlines would cut the line at."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield text[start:end].removesuffix("\r")
        start = end + 1


def check_extract(kind: str = "fact", *, tags: Iterable[str] = (), source: str | None = None,
                  rationale: str | None = None, alternatives: Iterable[str] = (),
                  allow_duplicate: bool = False) -> None:
    """The rules of adding with extract, in one place for every face: the LLM picks the facts and
    stores them as facts, with nothing of the add's own (kind, tags, source, ...) to carry."""
    if kind != "fact":
        raise UsageError(f"extract learns facts; it does not go with kind {kind!r}", params=("extract", "kind"))
    given = {"tags": list(tags or []), "source": source, "rationale": rationale,
             "alternatives": list(alternatives or []), "allow_duplicate": allow_duplicate}
    extra = [name for name, value in given.items() if value]
    if extra:
        raise UsageError(f"extract stores the facts it finds as they are; leave out {extra[0]} "
                         "(or store the text as it is, without extract)", params=("extract", extra[0]))


def new_memories(texts: Iterable[str], conversation: str = files.DEFAULT_CONVERSATION, kind: str = "fact",
                 tags: Iterable[str] | None = None, source: str | None = None, rationale: str | None = None,
                 alternatives: Iterable[str] | None = None, meta: dict[str, Any] | None = None,
                 created_at=None) -> list[Memory]:
    """Memories of one kind from texts, every field checked before anything is written."""
    files.check_conversation_id(conversation)
    role = role_for_kind(kind)
    if kind != "decision" and (rationale or list(alternatives or [])):
        raise UsageError("rationale and alternatives are for decisions (kind decision)",
                         params=("rationale", "alternatives", "kind"))
    extra = extra_fields(kind, tags, source, rationale, alternatives)
    clash = sorted(set(meta or {}) & set(files.CORE_KEYS))
    if clash:
        raise UsageError(f"meta may not set {clash[0]!r}")
    extra.update(meta or {})
    return [files.new_memory(text, role, conversation, created_at=created_at, extra=dict(extra)) for text in texts]


def store(vault: Vault, memories: Iterable[Memory], command: str = "add", by_conversation: bool = False,
          progress: Callable[[int, int], None] | None = None, expected: int | None = None,
          then: Callable[[Change], None] | None = None, slim: bool = False) -> Change:
    """Write memories, index them and commit, all under the vault lock.

    memories: a list, or an iterator that makes them while they are written (an import). A memory
    that carries a path (an exported one, imported back) is written there. by_conversation: the
    commit message counts the memories per conversation instead of naming every id. progress:
    (done, total) while they are indexed; expected: how many there will be (an iterator's), for it.
    They are indexed in batches while they are written (Change.index_pending). then(change): more
    of the same change once they are written (an import's updated notes), in the same commit.
    slim: the change keeps a vault.Stored of each memory, not the memory (Change.slim)."""
    if isinstance(memories, (list, tuple)) and not memories:
        raise UsageError("nothing to add: the input is empty")
    if vault.auto_index:
        # Load the model before taking the vault lock: the lock then covers only the write,
        # the index update and the commit, so parallel writers (cron + a shell) wait briefly.
        from memvault.store.models import get_embedder

        get_embedder(vault.settings.embedding_model)
    with vault.change(command, progress=progress) as change:
        change.by_conversation = by_conversation
        change.expected = expected
        change.slim = slim
        for memory in memories:
            change.add(memory, memory.path)
        if then is not None:
            then(change)
    return change


# -- duplicates: a text a live memory already holds word for word is not stored again -----------

def without_duplicates(vault: Vault, memories: Iterable[Memory], duplicates: list) -> Iterator[Memory]:
    """The memories whose exact text no live memory of their conversation and role holds (nor an
    earlier one of these), a batch at a time; the others go to `duplicates` as (new, holder)."""
    from itertools import islice

    from memvault.store.vault import INDEX_BATCH, Stored

    held: dict[tuple[str, str], dict[bytes, Memory | Stored]] = {}
    source = iter(memories)
    while chunk := list(islice(source, INDEX_BATCH)):
        found, first = duplicates_of(vault, chunk, held)
        taken = {id(new) for new, _ in found}
        duplicates.extend(found)
        yield from (m for m in chunk if id(m) not in taken)
        # Written by now: the map names them by their files from here on, not by the memories
        for group, key in first:
            if isinstance(held[group][key], Memory) and held[group][key].path is not None:
                held[group][key] = Stored.of(held[group][key], vault.root)


def _text_key(text: str) -> bytes:
    """A text's key in the duplicate map: a 16-byte digest, not the text (the map keeps one per line
    of a 100,000-line add)."""
    import hashlib

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def duplicates_of(vault: Vault, memories: list[Memory], held_by_group: dict) -> tuple[list, list]:
    """(new, the memory that already says it) for each new memory whose exact text is held by a live
    memory of its conversation and role, or by an earlier one of the same add (held_by_group: {(conversation,
    role): {text key: holder}}, what earlier batches held or added, kept across calls); and the
    (group, key) of each of these memories that became a holder itself."""
    from memvault.store import secret_scan
    from memvault.store.vault import Stored

    found: list[tuple[Memory, Memory | Stored]] = []
    first: list[tuple[tuple[str, str], bytes]] = []
    groups: dict[tuple[str, str], list[Memory]] = {}
    # The text as it will be stored: a key added again every night is held by its placeholder
    stored = {id(m): secret_scan.stored_text(vault, m.text) for m in memories}
    keys = {id(m): _text_key(stored[id(m)]) for m in memories}
    for memory in memories:
        groups.setdefault((memory.conversation_id, memory.role), []).append(memory)
    # The index as it is (no sync: an add says nothing about unrelated files); what it claims is
    # checked on the files, so a memory deleted by hand never swallows a new one.
    index = vault.index if vault.exists() else None
    for group_key, group in groups.items():
        conversation, role = group_key
        held = held_by_group.setdefault(group_key, {})
        fresh = [stored[id(m)] for m in group if keys[id(m)] not in held]
        rows = index.same_texts(conversation, role, fresh) if index is not None and fresh else {}
        for text, row in rows.items():
            memory = files.still_live(vault.root, vault.root / row["path"], row["id"], text)
            if memory is not None:
                held[_text_key(text)] = Stored.of(memory, vault.root)
        for memory in group:
            key = keys[id(memory)]
            if key in held:
                found.append((memory, held[key]))
            else:
                held[key] = memory  # a second copy in the same add is a duplicate too
                first.append((group_key, key))
    return found, first


@dataclass
class Added:
    """What an add did: the memories it stored (`stored`: files.Memory when they were given as a list;
    made as they were written, add_jsonl's, vault.Stored records: id, role, kind, conversation_id,
    created_at, path, `read()` gives the whole memory, so that a 100,000-line add does not hold 100,000
    texts to return them), what it did not store because a live memory of the same conversation and
    kind already says exactly that (`duplicates`: (the memory given, the one that holds it)), the commit,
    and with add_jsonl's extract what was learned (`learned`, learn.Learned) and the episodes written
    (`episodes`, episodes.Closed). Iterating it, its length and indexing are the stored memories'."""

    stored: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    commit: str | None = None
    learned: Any = None
    episodes: list = field(default_factory=list)

    def __iter__(self):
        return iter(self.stored)

    def __len__(self) -> int:
        return len(self.stored)

    def __getitem__(self, at):
        return self.stored[at]

    def to_json(self, root) -> list[dict[str, Any]]:
        """What `add --json` prints: each stored memory, and for each duplicate the memory that held it
        (`"stored": false`)."""
        return list(self.json_rows(root))

    def json_rows(self, root) -> Iterator[dict[str, Any]]:
        """to_json one row at a time (a Stored memory is read from its file when its turn comes)."""
        for memory in self.stored:
            yield {**memory.to_json(root), "stored": True}
        for _, held in self.duplicates:
            yield {**held.to_json(root), "stored": False}


def add_memories(vault: Vault, memories: Iterable[Memory], *, allow_duplicate: bool = True,
                 progress: Callable[[int, int], None] | None = None, expected: int | None = None) -> Added:
    """Store memories (a list, or an iterator that makes them as they are written) in one commit; with
    allow_duplicate=False, not those a live memory already holds word for word (same conversation and
    kind), nor a second copy within them. Made as they are written (an iterator), they come back as
    Stored records: holding them whole until the end is what made a 100,000-line add --jsonl peak at 814 MB."""
    from memvault.store.vault import ADD

    duplicates: list[tuple[Memory, Memory]] = []
    source = memories if allow_duplicate else without_duplicates(vault, memories, duplicates)
    change = store(vault, source, "add", progress=progress, expected=expected,
                   slim=not isinstance(memories, (list, tuple)))
    stored = [event.memory for event in change.of(ADD)]
    return Added(stored, duplicates, change.commit_sha if stored else None)
