"""Time in questions (issue 29; docs/design.md, "The read path"): what a query says about time,
read against the query's clock (`now`), and what it does to the ranking.

- A time the query names ("last week", "in May 2023", "two years ago", "yesterday", "since March")
  becomes a range of days; memories created in it are brought in as candidates (a third list
  beside dense and BM25) and lifted (RANGE_WEIGHT). A boost, not a filter: evidence outside the
  range still comes back when it matches better (`--since/--until` filter).
- A question that asks when ("when did...", "what year...", "how long ago...") lifts the candidates
  whose own words name a time ("yesterday", "last Friday", "in 2019": WHEN_WEIGHT). A memory's date
  is its created_at, which every memory has; what tells an answer to "when" apart is a turn that
  places the event relative to that date (LoCoMo: 79% of the temporal questions' evidence turns
  have one, 15% of all turns; bench/README.md, "Time in questions").

The words are read by dateparser (search_dates, relative to the clock, dates from the past
preferred); it costs ~80 ms to import and its language data more at the first parse, so it is
imported only when a cheap look at the query finds a word that can name a time (TIME_WORD): a
query without one never loads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timedelta, timezone
from typing import Sequence

# How much a time cue lifts a candidate's relevance r (before recency and MMR):
# r + weight * (1 - r), as the session lift does. On LoCoMo's tuning conversations (bench/README.md,
# "Time in questions") the "when" lift gains most at 0.2-0.3 (temporal R@10 .784 -> .833); the range
# lift is best small (0.1: R@10 .783, 0.25: .782, 0.5: .776: LoCoMo's sessions tell of events days
# after them), and 0.25 is the least that puts the memory of "last week" or "May 2023" above an equal
# or closer match from another time in a personal vault (tests/test_when.py).
RANGE_WEIGHT = 0.25
WHEN_WEIGHT = 0.2

# Words without which no date can be named: the gate before dateparser is imported (and, for a
# "when" question, before a candidate's text is parsed). It only decides whether to look; what a
# time is, is dateparser's to say.
# Digits count only in a shape a date or time has: a year, 12/25 or 2023-05-01, the 5th, 9:15 (a
# version number, a price or "(34)" sends no query to dateparser: 3-5 ms a query saved).
TIME_WORD = re.compile(
    r"\b(?:1[6-9]|20)\d\d\b|\b\d{1,4}[/.-]\d{1,2}\b|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}:\d\d\b|"
    r"\b(?:ago|yesterday|today|tonight|tomorrow|"
    r"week|weeks|weekend|month|months|year|years|day|days|decade|morning|evening|night|"
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t|tember)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|spring|summer|autumn|fall|winter|"
    r"mon(?:day)?|tue(?:s|sday)?|wed(?:nesday)?|thu(?:rs|rsday)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?)\b",
    re.IGNORECASE)
# A question about when: its answer is a time.
ASKS_WHEN = re.compile(r"^\s*when\b|\bwhen (?:did|was|were|is|are|do|does|will|had|has|have)\b|"
                       r"\bwhat (?:date|day|year|month|time)\b|\bwhich (?:date|day|year|month)\b|\bhow long ago\b",
                       re.IGNORECASE)
# "before May 2023", "since last week": the range runs open on one side.
OPEN_BEFORE = re.compile(r"\b(?:before|until|till|prior to)\s*$", re.IGNORECASE)
OPEN_AFTER = re.compile(r"\b(?:after|since)\s*$", re.IGNORECASE)
_PERIOD_DAYS = {"day": 1, "time": 1}
# Short forms dateparser reads as dates that are often other words or names ("Klara and the Sun",
# "lunch with Jan", "I Sat down"): a time only beside a number ("Sat 5th", "Mar 3").
SHORT_FORMS = frozenset("mon tue tues wed thu thur thurs fri sat sun jan feb mar apr jun jul aug sep sept oct "
                        "nov dec".split())
# A number of one or two digits standing alone (not part of 12/25 or 9:15): dateparser may read it
# as a year ("Thursday (34)": 1934).
_LONE_NUMBER = re.compile(r"(?<![\d/.:-])\d{1,2}(?![\d/.:-])")
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_WEEKDAY_FORMS = WEEKDAYS | frozenset("mon tue tues wed thu thurs fri sat sun".split())  # as TIME_WORD finds them
# A weekday alone ("on Wednesday") names a day only in a question about the past ("what did Leo do
# on Wednesday": last Wednesday); "what does Leo do on Wednesday" asks what is usual, no range.
_PAST = re.compile(r"\b(?:did|was|were|had|went|got|made|said|told|met|saw|ate|came|took|bought|left|"
                   r"\w{3,}ed)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TimeRange:
    """A stretch of time a query names: start inclusive, end exclusive, in the zone of the query's
    clock (its days are that clock's days); None: open."""

    phrase: str
    start: datetime | None
    end: datetime | None

    def holds(self, moment: datetime) -> bool:
        return (self.start is None or moment >= self.start) and (self.end is None or moment < self.end)

    def __str__(self) -> str:
        day = "%Y-%m-%d"
        start = self.start.strftime(day) if self.start else "..."
        end = (self.end - timedelta(microseconds=1)).strftime(day) if self.end else "..."
        return f"{self.phrase!r}: {start} to {end}"


@dataclass(frozen=True)
class QueryTime:
    """What a query says about time."""

    ranges: tuple[TimeRange, ...] = ()
    asks_when: bool = False

    def in_range(self, moment: datetime) -> bool:
        return any(r.holds(moment) for r in self.ranges)

    def names_range(self, told: Sequence) -> bool:
        """Whether a memory's resolved relative times (store/relative_times.Told: "yesterday", said the
        day after) fall in a range the query names."""
        for t in told:
            start = datetime(t.start.year, t.start.month, t.start.day, tzinfo=timezone.utc)
            end = datetime(t.end.year, t.end.month, t.end.day, tzinfo=timezone.utc)
            if any((r.start is None or end > r.start) and (r.end is None or start < r.end) for r in self.ranges):
                return True
        return False

    def span(self) -> tuple[datetime | None, datetime | None]:
        """From the earliest start to the latest end of the ranges (None: open)."""
        starts = [r.start for r in self.ranges]
        ends = [r.end for r in self.ranges]
        return (None if None in starts else min(starts)), (None if None in ends else max(ends))


def read(text: str, now: datetime) -> QueryTime | None:
    """What `text` says about time, relative to `now`; None when it says nothing (dateparser is
    imported only when the text has a TIME_WORD)."""
    asks_when = bool(ASKS_WHEN.search(text))
    cues = [m.group() for m in TIME_WORD.finditer(text)]
    if cues and all(c.lower() in _WEEKDAY_FORMS for c in cues) and not _PAST.search(text):
        cues = []  # weekdays alone in a question about what is usual (_ranges): no range to read
    ranges = tuple(_ranges(text, now)) if cues else ()
    if not ranges and not asks_when:
        return None
    return QueryTime(ranges, asks_when)


def names_time(text: str, now: datetime | None = None) -> bool:
    """Whether a memory's own words place something in time ("yesterday", "last Friday", "in 2019")."""
    return bool(TIME_WORD.search(text)) and _names_time(text, now or datetime.now(timezone.utc))


@lru_cache(maxsize=8192)
def _names_time(text: str, created: datetime) -> bool:
    # Asked of every candidate of a "when" question (dateparser: ~0.3 ms each, 10-16 ms a search);
    # a warm process meets the same memories again (~2 MB for the texts kept).
    return bool(_found(text, created))


def lift(pool: Sequence, relevance: Sequence[float], asked: QueryTime, created: Sequence[datetime]
         ) -> list[float]:
    """Relevance with the query's time applied: a candidate created in a range the query names, or
    whose words name a time in it (its resolved relative times, `told`), gains RANGE_WEIGHT * (1 - r),
    one whose words name a time, for a "when" question, WHEN_WEIGHT * (1 - r). Sets scores "time"
    (what was added) and "in_range" on the results."""
    lifted = list(relevance)
    for i, (result, moment) in enumerate(zip(pool, created)):
        weight = 0.0
        if asked.ranges and (asked.in_range(moment) or asked.names_range(getattr(result, "told", ()))):
            result.scores["in_range"] = True
            weight += RANGE_WEIGHT
        if asked.asks_when and WHEN_WEIGHT and (getattr(result, "told", None) or names_time(result.text, moment)):
            weight += WHEN_WEIGHT
        if weight:
            lifted[i] = relevance[i] + min(weight, 1.0) * (1.0 - relevance[i])
            result.scores["time"] = lifted[i] - relevance[i]
    return lifted


def _found(text: str, now: datetime) -> list[tuple[str, datetime]]:
    """dateparser's finds in `text` that are times. It also reads "we" as Wednesday, "may" as the
    month and "18th" as a day of this month, so a find counts when it has a year (four digits), a
    word of four letters or more ("yesterday", "3 days ago"), or a capitalised word inside a
    sentence ("in May")."""
    from dateparser.search import search_dates

    base = _wall_clock(now)
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past", "RETURN_AS_TIMEZONE_AWARE": False}
    try:
        found = search_dates(text, languages=["en"], settings=settings) or []
    except Exception:  # dateparser's own failures on odd text: no time read, the search goes on
        return []
    kept, searched = [], 0
    for phrase, moment in found:
        at = text.find(phrase, searched)
        at = at if at >= 0 else text.find(phrase)
        searched = max(at, 0) + len(phrase)
        words = [(m.group(), max(at, 0) + m.start()) for m in re.finditer(r"[^\W\d_]+", phrase)]
        has_digit = any(c.isdigit() for c in phrase)
        if not (re.search(r"\d{4}", phrase) or any(len(w) >= 4 for w, _ in words)
                or any(w[0].isupper() and w.lower() not in SHORT_FORMS and _inside_sentence(text, pos)
                       for w, pos in words)
                or (has_digit and any(w.lower() in SHORT_FORMS for w, _ in words))):
            continue
        if moment.year != base.year and any(int(n) == moment.year % 100 for n in _LONE_NUMBER.findall(phrase)) \
                and not re.search(r"\d{4}|\b(?:ago|last|past|previous|years?)\b", phrase, re.IGNORECASE):
            # A lone number read as a year: what is left without it ("in April (35)": "in April").
            rest = _LONE_NUMBER.sub("", phrase).replace("()", "").strip()
            moment = _parse(rest, settings) if any(len(w) >= 4 for w in re.findall(r"[^\W\d_]+", rest)) else None
            if moment is None:
                continue
            phrase = rest
        kept.append((phrase, moment))
    return kept


def _parse(phrase: str, settings: dict) -> datetime | None:
    from dateparser import parse

    try:
        return parse(phrase, languages=["en"], settings=settings)
    except Exception:  # dateparser's own failures: no time read
        return None


def _inside_sentence(text: str, position: int) -> bool:
    before = text[:position].rstrip()
    return bool(before) and before[-1] not in ".!?:;\"'(\n"


def _ranges(text: str, now: datetime) -> list[TimeRange]:
    from dateparser.date import DateDataParser

    base = _wall_clock(now)
    parser = DateDataParser(languages=["en"], settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past",
                                                         "RETURN_AS_TIMEZONE_AWARE": False})
    finds: list[tuple[str, datetime, int]] = []
    for phrase, moment in _found(text, now):
        at = text.find(phrase, finds[-1][2] + len(finds[-1][0]) if finds else 0)
        if finds and at >= 0 and not text[finds[-1][2] + len(finds[-1][0]):at].strip(" ,"):
            # dateparser's search cuts "before May 2023" into "May" and "2023": read them together
            joined = text[finds[-1][2]:at + len(phrase)]
            data = parser.get_date_data(joined)
            if data.date_obj is not None:
                finds[-1] = (joined, data.date_obj, finds[-1][2])
                continue
        finds.append((phrase, moment, max(at, 0)))
    ranges = []
    for phrase, moment, at in finds:
        words = {w.lower() for w in re.findall(r"[^\W\d_]+", phrase)}
        if words & WEEKDAYS and words <= WEEKDAYS | {"on", "the", "a"} and not _PAST.search(text):
            continue  # a weekday alone in a question about what is usual
        period = parser.get_date_data(phrase).period or "day"
        try:
            start, end = _period(moment, period, now.tzinfo or timezone.utc)
        except (ValueError, OverflowError):  # "in 9999": a range past datetime's last year is no range
            continue
        before = text[:at]
        if OPEN_BEFORE.search(before) or re.match(r"\s*(?:before|until|till)\b", phrase, re.IGNORECASE):
            start, end = None, start
        elif OPEN_AFTER.search(before) or re.match(r"\s*(?:after|since)\b", phrase, re.IGNORECASE):
            after = re.search(r"\bafter\s*$", before, re.IGNORECASE) or re.match(r"\s*after\b", phrase, re.IGNORECASE)
            start, end = (end if after else start), None
        ranges.append(TimeRange(phrase.strip(), start, end))
    return ranges


def _wall_clock(now: datetime) -> datetime:
    """The clock as its own zone reads it, without the zone (what dateparser counts from): at
    2026-11-27T19:00:00-08:00 "yesterday" is the 26th, as it is for whoever wrote that clock, though
    it is already the 28th in UTC."""
    return now.replace(tzinfo=None) if now.tzinfo is not None else now


def _period(moment: datetime, period: str, zone=timezone.utc) -> tuple[datetime, datetime]:
    """The calendar day, week (Monday first), month or year around a moment (a wall-clock time of
    the query's clock), its bounds in that clock's zone."""
    day = datetime(moment.year, moment.month, moment.day, tzinfo=zone)
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if period == "month":
        start = day.replace(day=1)
        return start, (start + timedelta(days=32)).replace(day=1)
    if period == "year":
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    return day, day + timedelta(days=_PERIOD_DAYS.get(period, 1))
