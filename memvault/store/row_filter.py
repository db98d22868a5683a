"""Which rows of the index a retriever may return, said once: as the SQL filter LanceDB reads
(`sql`), and as a mask over the columns a long-lived process holds in memory (`mask`,
dense_copy.py). Both come from the same fields, so the two paths cannot disagree on a row
(tests/test_dense_copy.py compares them on a real table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memvault.store.turn_context import TURN_ROLES


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _like_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def micros(moment) -> int | None:
    """A datetime as the table stores times: UTC microseconds (created_us, told_*_us)."""
    return int(moment.timestamp() * 1_000_000) if moment is not None else None


@dataclass(frozen=True)
class RowFilter:
    roles: tuple[str, ...] | None = None  # any of these roles; None: every role
    conversations: tuple[str, ...] | None = None  # any of these conversations; None: every one
    tags: tuple[str, ...] = ()  # every one of these tags
    since_us: int | None = None  # created_us >= since_us
    until_us: int | None = None  # created_us <= until_us
    # Left out: the turns of this conversation created from this time on (a session's own turns).
    skip_turns: tuple[str | None, int] | None = None  # (None: of every conversation)
    skip_ids: tuple[str, ...] = ()
    # Created in [start, end) or, told, naming in its words a time in it (None: open on that side).
    time_range: tuple[int | None, int | None, bool] | None = None
    said_by: str | None = None  # a chat line of this speaker: text starts with "Name: "

    def sql(self) -> str:
        """The filter as LanceDB reads it (index.where_clause renders through it); "true" for none."""
        clauses = []
        if self.roles is not None:
            clauses.append("role IN (" + ", ".join(_sql_str(r) for r in self.roles) + ")")
        if self.conversations is not None:
            if len(self.conversations) == 1:
                clauses.append(f"conversation_id = {_sql_str(self.conversations[0])}")
            else:
                clauses.append("conversation_id IN (" + ", ".join(_sql_str(c) for c in self.conversations) + ")")
        for tag in self.tags:
            clauses.append(f"tags LIKE {_sql_str('%|' + _like_escape(tag) + '|%')} ESCAPE '\\'")
        if self.since_us is not None:
            clauses.append(f"created_us >= {self.since_us}")
        if self.until_us is not None:
            clauses.append(f"created_us <= {self.until_us}")
        if self.time_range is not None:
            clauses.append(_time_sql(*self.time_range))
        where = " AND ".join(clauses) or "true"
        if self.skip_turns is not None:
            conversation, since = self.skip_turns
            turns = " AND ".join(["role IN (" + ", ".join(_sql_str(r) for r in TURN_ROLES) + ")",
                                  *([f"conversation_id = {_sql_str(conversation)}"] if conversation is not None else []),
                                  f"created_us >= {since}"])
            where += f" AND NOT ({turns})"
        if self.skip_ids:
            where += " AND NOT (id IN (" + ", ".join(_sql_str(i) for i in self.skip_ids) + "))"
        if self.said_by is not None:
            where += f" AND text LIKE {_sql_str(_like_escape(self.said_by) + ': %')} ESCAPE '\\'"
        return where

    def mask(self, columns: dict[str, Any]):
        """The rows it keeps, over columns as numpy arrays (dense_copy.Columns: role, conversation_id,
        tags, text, id as object arrays; created_us as int64; told_from_us and told_to_us as float64,
        NaN where the row names no time): what LanceDB's SQL keeps, NULL read as SQL reads it."""
        import numpy as np

        n = len(columns["id"])
        keep = np.ones(n, dtype=bool)
        if self.roles is not None:
            keep &= np.isin(columns["role"], list(self.roles))
        if self.conversations is not None:
            keep &= np.isin(columns["conversation_id"], list(self.conversations))
        for tag in self.tags:
            needle = f"|{tag}|"
            keep &= np.fromiter((t is not None and needle in t for t in columns["tags"]), dtype=bool, count=n)
        created = columns["created_us"]
        if self.since_us is not None:
            keep &= created >= self.since_us
        if self.until_us is not None:
            keep &= created <= self.until_us
        if self.time_range is not None:
            start, end, told = self.time_range
            made = np.ones(n, dtype=bool)
            if start is not None:
                made &= created >= start
            if end is not None:
                made &= created < end
            if told:
                told_from, told_to = columns["told_from_us"], columns["told_to_us"]
                named = ~np.isnan(told_from)
                with np.errstate(invalid="ignore"):  # NaN compares false, as NULL does in SQL
                    if start is not None:
                        named &= told_to > start
                    if end is not None:
                        named &= told_from < end
                made |= named
            keep &= made
        if self.skip_turns is not None:
            conversation, since = self.skip_turns
            turns = np.isin(columns["role"], list(TURN_ROLES)) & (created >= since)
            if conversation is not None:
                turns &= columns["conversation_id"] == conversation
            keep &= ~turns
        if self.skip_ids:
            keep &= ~np.isin(columns["id"], list(self.skip_ids))
        if self.said_by is not None:
            prefix = self.said_by + ": "
            keep &= np.fromiter((t is not None and t.startswith(prefix) for t in columns["text"]), dtype=bool, count=n)
        return keep


def _time_sql(start: int | None, end: int | None, told: bool) -> str:
    """Created in [start, end) or, told, naming in its words a time in it (told_from_us/told_to_us:
    "yesterday" said the day after); microseconds, None: open on that side."""
    created = [f"created_us >= {start}"] if start is not None else []
    created += [f"created_us < {end}"] if end is not None else []
    created_clause = " AND ".join(created) or "true"
    if not told:
        return created_clause
    named = ["told_from_us IS NOT NULL"]
    named += [f"told_to_us > {start}"] if start is not None else []
    named += [f"told_from_us < {end}"] if end is not None else []
    return f"(({created_clause}) OR ({' AND '.join(named)}))"
