"""Relative times in a memory's own words, resolved against the memory's date (issue 45; docs/design.md,
"The index" and "The read path").

A turn said on Tue 6 June 2023, "I went to the lake yesterday", is about Mon 5 June 2023; a reader shown
"[2023-06-06] I went to the lake yesterday" answers "Yesterday". So when a memory is indexed, the relative
expressions of its text ("yesterday", "last Friday", "two weeks ago", "next summer", "this month") are
resolved against its created_at and kept in its index row (column `told`), never in its text: the block a
model reads shows them beside the words ("yesterday (Mon 5 June 2023)"), and a question about a time finds
them (the row's `told_from_us`/`told_to_us` span: the time-range candidates and lift of reading/when.py).
Not in BM25's text: the added words made a memory's text longer, and BM25 then ranked it below the same
words without them.

What counts is found by one regular expression (RELATIVE_PATTERN): a memory without such an expression costs
nothing more and never imports dateparser (~100 ms; 85% of LoCoMo's turns have none). The arithmetic is
dateparser's ("two weeks ago", "last Friday", "in 3 days"), but for what it does not read: seasons, weekends,
"last December", "a few days ago", "a couple of weeks ago" (small rules below). A day-relative expression
that names the memory's own day ("today", "tonight", "this morning") is not resolved: the memory's date
says it already.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

_NUMBER = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,3}|a couple of|a few|few|several)"
_UNIT = r"(?:days?|weeks?|months?|years?)"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
_SEASON = r"(?:spring|summer|autumn|fall|winter)"
# The relative expressions resolved; longest alternatives first. Compiled on first use: a search
# whose rows name no relative time (every plain search of a vault without them) never needs it.
RELATIVE_PATTERN = (
    r"\b(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|tomorrow|last\s+night|"
    rf"(?:this\s+past|last|next|this|past|previous|coming)\s+(?:week(?:end)?|month|year|{_WEEKDAY}|{_SEASON}|{_MONTH})|"
    rf"{_NUMBER}\s+{_UNIT}\s+ago|in\s+{_NUMBER}\s+{_UNIT})\b")


@functools.cache
def _relative() -> re.Pattern:
    return re.compile(RELATIVE_PATTERN, re.IGNORECASE)


# Units the label and the span go by.
DAY, WEEK, WEEKEND, MONTH, SEASON, YEAR = "day", "week", "weekend", "month", "season", "year"
WEEKDAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
               "November", "December")
_MONTHS = {name.lower(): i for i, name in enumerate(MONTH_NAMES, 1)}
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month (northern, meteorological)
_FEW = {"a couple of": 2, "a few": 3, "few": 3, "several": 4}


@dataclass(frozen=True)
class Told:
    """One relative expression of a memory's text and what it names: a stretch of days [start, end),
    counted in `unit`; `about`: approximate ("two weeks ago": around that day)."""

    phrase: str
    start: date
    end: date
    unit: str
    about: bool = False

    def to_json(self) -> list:
        return [self.phrase, self.start.isoformat(), self.end.isoformat(), self.unit, int(self.about)]

    @classmethod
    def from_json(cls, row: list) -> "Told":
        phrase, start, end, unit, about = row
        return cls(phrase, date.fromisoformat(start), date.fromisoformat(end), unit, bool(about))

    def words(self) -> str:
        """What the model is shown after the phrase: "Mon 5 June 2023", "the week of Mon 29 May 2023",
        "June 2023", "summer 2024", "around Tue 23 May 2023"."""
        if self.unit == DAY:
            said = day_words(self.start)
        elif self.unit == WEEK:
            said = day_words(self.start + timedelta(days=3)) if self.about else f"the week of {day_words(self.start)}"
        elif self.unit == WEEKEND:
            said = f"the weekend of {day_words(self.start)}"
        elif self.unit == MONTH:
            said = f"{MONTH_NAMES[self.start.month - 1]} {self.start.year}"
        elif self.unit == SEASON:
            said = _season_words(self.start)
        else:
            said = str(self.start.year)
        return f"around {said}" if self.about else said


def day_words(moment: date | datetime) -> str:
    """A day as a person writes it: "Tue 6 June 2023" (English names whatever the locale)."""
    return f"{WEEKDAY_NAMES[moment.weekday()]} {moment.day} {MONTH_NAMES[moment.month - 1]} {moment.year}"


def _season_words(start: date) -> str:
    name = next(n for n, m in _SEASONS.items() if m == start.month and n != "fall")
    return f"winter {start.year}-{str(start.year + 1)[-2:]}" if name == "winter" else f"{name} {start.year}"


def has_relative(text: str) -> bool:
    """Whether the text has an expression to resolve (no import, a regular expression)."""
    return bool(_relative().search(text))


def resolve(text: str, said_at: datetime) -> list[Told]:
    """The relative expressions of `text`, resolved against `said_at` (its UTC day), in text order.
    Cheap for a text without one (the regular expression alone)."""
    found = list(_relative().finditer(text))
    if not found:
        return []
    said = said_at.astimezone(timezone.utc) if said_at.tzinfo else said_at
    told = []
    for match in found:
        phrase = match.group()
        try:
            resolved = _resolve(" ".join(phrase.lower().split()), said.replace(tzinfo=None))
        except (ValueError, OverflowError):  # a date before year 1 or past 9999
            resolved = None
        if resolved is not None:
            told.append(Told(phrase, *resolved))
    return told


def dumps(told: list[Told]) -> str | None:
    return json.dumps([t.to_json() for t in told], separators=(",", ":")) if told else None


def loads(raw: str | None) -> list[Told]:
    if not raw:
        return []
    try:
        return [Told.from_json(row) for row in json.loads(raw)]
    except (ValueError, TypeError):  # a row written by a later memvault in another shape: shown without
        return []


def span_us(told: list[Told]) -> tuple[int | None, int | None]:
    """The whole stretch the expressions name, in UTC microseconds [from, to): the index's told_from_us,
    told_to_us."""
    if not told:
        return None, None
    first = min(t.start for t in told)
    last = max(t.end for t in told)
    return _us(first), _us(last)


def _us(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp() * 1_000_000)


def inline(text: str, told: list[Told]) -> str:
    """The text with each expression's resolution after it: "I went to the lake yesterday (Mon 5 June
    2023)". Whitespace runs are made one space (as the block shows text); the words are the user's."""
    shown = " ".join(text.split())
    at = 0
    for t in told:
        phrase = " ".join(t.phrase.split())
        found = shown.find(phrase, at)
        if found < 0:
            continue
        end = found + len(phrase)
        note = f" ({t.words()})"
        shown = shown[:end] + note + shown[end:]
        at = end + len(note)
    return shown


# -- the arithmetic --------------------------------------------------------------------------------
def _resolve(phrase: str, said: datetime) -> tuple[date, date, str, bool] | None:
    today = said.date()
    words = phrase.split()
    if phrase == "last night":
        day = today - timedelta(days=1)
        return day, day + timedelta(days=1), DAY, False
    if words[0] in ("last", "next", "this", "past", "previous", "coming") and words[-1] in _SEASONS:
        return _season(words[-1], "last" if words[0] in ("past", "previous") or words[:2] == ["this", "past"]
                       else "next" if words[0] == "coming" else words[0], today)
    if words[-1] == "weekend":
        return _weekend("last" if words[0] in ("last", "past", "previous") or words[:2] == ["this", "past"]
                        else "next" if words[0] in ("next", "coming") else "this", today)
    if words[-1] in _MONTHS and words[0] in ("last", "next", "this", "past", "previous", "coming"):
        return _named_month(_MONTHS[words[-1]], words[0], today)
    few = next((n for w, n in _FEW.items() if phrase.startswith(w + " ") or phrase.startswith("in " + w + " ")), None)
    if few is not None:
        unit = words[-2] if words[-1] == "ago" else words[-1]
        step = {"day": timedelta(days=few), "week": timedelta(weeks=few)}.get(unit.rstrip("s"))
        sign = -1 if words[-1] == "ago" else 1
        if step is not None:
            return _around(today + sign * step, DAY if unit.startswith("day") else WEEK)
        months = few * (12 if unit.startswith("year") else 1)
        year, month = divmod(today.year * 12 + today.month - 1 + sign * months, 12)
        return _around(date(year, month + 1, 1), YEAR if unit.startswith("year") else MONTH)
    normalised = re.sub(r"^(?:this past|past|previous)\b", "last", re.sub(r"^coming\b", "next", phrase))
    return _parsed(normalised, said)


def _parsed(phrase: str, said: datetime) -> tuple[date, date, str, bool] | None:
    from dateparser.date import DateDataParser

    parser = DateDataParser(languages=["en"], settings={"RELATIVE_BASE": said, "PREFER_DATES_FROM": "past",
                                                         "RETURN_AS_TIMEZONE_AWARE": False})
    try:
        data = parser.get_date_data(phrase)
    except Exception:  # dateparser's own failures on odd text: not resolved
        return None
    if data.date_obj is None:
        return None
    day = data.date_obj.date()
    period = data.period or "day"
    if phrase.endswith("ago") or phrase.startswith("in "):  # "two weeks ago": around a day, on its scale
        if period == "day":
            return day, day + timedelta(days=1), DAY, False
        return _around(day, {"week": WEEK, "month": MONTH}.get(period, YEAR))
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7), WEEK, False
    if period == "month":
        return _month(day.year, day.month) + (MONTH, False)
    if period == "year":
        return date(day.year, 1, 1), date(day.year + 1, 1, 1), YEAR, False
    if day == said.date() and phrase.startswith("this"):
        return None  # "this Tuesday" said on a Tuesday: its own day
    return day, day + timedelta(days=1), DAY, False


def _around(day: date, unit: str) -> tuple[date, date, str, bool]:
    """An approximate time: the day itself for a count of days, three days either side of it for weeks,
    else its month or year; shown as "around Tue 23 May 2023", "around June 2023", "around 2019"."""
    if unit == DAY:
        return day, day + timedelta(days=1), DAY, True
    if unit == WEEK:  # three days either side
        return day - timedelta(days=3), day + timedelta(days=4), WEEK, True
    if unit == MONTH:
        return _month(day.year, day.month) + (MONTH, True)
    return date(day.year, 1, 1), date(day.year + 1, 1, 1), YEAR, True


def _month(year: int, month: int) -> tuple[date, date]:
    start = date(year, month, 1)
    return start, (start + timedelta(days=32)).replace(day=1)


def _named_month(month: int, which: str, today: date) -> tuple[date, date, str, bool]:
    """"last December" (the latest December before this month), "next May", "this May" (this year's)."""
    year = today.year
    if which in ("last", "past", "previous"):
        year -= 0 if month < today.month else 1
    elif which in ("next", "coming"):
        year += 0 if month > today.month else 1
    return _month(year, month) + (MONTH, False)


def _season(name: str, which: str, today: date) -> tuple[date, date, str, bool]:
    """Meteorological seasons of the northern hemisphere (summer: June to August; winter: December to
    February, named by its December's year). "last summer": the latest that has ended; "next summer":
    the first that has not begun; "this summer": this year's (this winter: the one around the turn of
    the year nearest today)."""
    first = _SEASONS[name]

    def season(year: int) -> tuple[date, date]:
        start = date(year, first, 1)
        end_year, end_month = divmod(year * 12 + first - 1 + 3, 12)
        return start, date(end_year, end_month + 1, 1)

    if which == "last":
        year = today.year
        while season(year)[1] > today:
            year -= 1
    elif which == "next":
        year = today.year - 1
        while season(year)[0] <= today:
            year += 1
    else:
        year = today.year if first != 12 or today.month >= 6 else today.year - 1
    return season(year) + (SEASON, False)


def _weekend(which: str, today: date) -> tuple[date, date, str, bool]:
    """Saturday and Sunday: "this weekend" of this week (Monday first), "last weekend" the one before it,
    "next weekend" the one after it (said on a weekend: the coming one)."""
    saturday = today + timedelta(days=5 - today.weekday())
    if which == "last":
        saturday -= timedelta(days=7)
    elif which == "next":
        saturday += timedelta(days=7)
    return saturday, saturday + timedelta(days=2), WEEKEND, False
