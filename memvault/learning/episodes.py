"""Episodes (docs/design.md, "Episodes"): a conversation cut into stretches that each tell what
happened, one file per stretch (entries/<c>/episodes/<ts>__<id>.md, role `episode`): front
matter title, started_at, ended_at, turn_ids, boundary; the body a third-person narrative.

Boundaries are found without a model: a silence longer than soft_decay_minutes, a `chat --clear`,
and a topic shift (the embedding similarity of the windows of turns either side of a point falls
below TOPIC_THRESHOLD, measured by bench/episode_boundaries.py). The turns after the last written
episode are the open episode; it is written when it closes (a later boundary, `episodes --close`,
the end of an imported batch). The model writes the title and narrative; should it fail, or write
what the turns do not say (`grounding`), a plain title and narrative made from the turns stand in,
so an episode never waits on the model and never tells what did not happen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Sequence

from memvault.store import files
from memvault.store.files import Memory
from memvault.learning.sessions import ended_at, open_turns  # where a chat and learning find the open episode

# session-end and compact: a coding agent's session ended, or compacted its context (agent_sessions.py)
BOUNDARIES = ("time-gap", "topic-shift", "session-clear", "import", "closed", "session-end", "compact")
KEPT_CUTS = ("session-clear", "closed", "import", "session-end", "compact")  # what a rebuild cuts again
# Topic shifts (bench/episode_boundaries.py on LoCoMo; bench/README.md, "Episodes"): the mean
# embedding of TOPIC_WINDOW turns before a point against the TOPIC_WINDOW after it, a cut where the
# cosine is below TOPIC_THRESHOLD, the lowest first, no episode shorter than MIN_EPISODE_TURNS.
TOPIC_WINDOW = 3
TOPIC_THRESHOLD = 0.25
MIN_EPISODE_TURNS = 6
# A chat closes at most this many episodes (the oldest first): an old vault's first chat after an
# upgrade would otherwise write one per silence in its whole history at once. `memvault episodes`
# closes them all.
EPISODES_PER_CHAT = 3
# What the narrative prompt shows of a long episode: its start and its end, this many characters.
MAX_TRANSCRIPT_CHARS = 6000


@dataclass
class Segment:
    """A stretch of turns, oldest first, and why it ended (None: it goes on, the open episode)."""

    turns: list[Memory]
    boundary: str | None = None

    @property
    def started_at(self) -> datetime:
        return self.turns[0].created_at

    @property
    def ended_at(self) -> datetime:
        return self.turns[-1].created_at


# -- segmentation (no model) -------------------------------------------------------------------


def _unit(vectors) -> Any:
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def window_similarities(vectors: Sequence, window: int = TOPIC_WINDOW) -> dict[int, float]:
    """{position: cosine of the mean of the `window` turns before it and the `window` from it on},
    for every position with a full window on both sides."""
    import numpy as np

    if len(vectors) < 2 * window:
        return {}
    unit = _unit(vectors)
    out = {}
    for i in range(window, len(unit) - window + 1):
        left, right = unit[i - window:i].mean(axis=0), unit[i:i + window].mean(axis=0)
        denominator = float(np.linalg.norm(left) * np.linalg.norm(right)) or 1.0
        out[i] = float(np.dot(left, right)) / denominator
    return out


def topic_cuts(vectors: Sequence, threshold: float = TOPIC_THRESHOLD, window: int = TOPIC_WINDOW,
               min_turns: int = MIN_EPISODE_TURNS) -> list[int]:
    """Positions where a new topic starts: similarity below `threshold`, the lowest first, each piece
    at least `min_turns` long. Sorted."""
    similarities = window_similarities(vectors, window)
    cuts: list[int] = []
    for position, similarity in sorted(similarities.items(), key=lambda item: (item[1], item[0])):
        if similarity >= threshold:
            break
        if position < min_turns or len(vectors) - position < min_turns:
            continue
        if all(abs(position - c) >= min_turns for c in cuts):
            cuts.append(position)
    return sorted(cuts)


def segment(turns: list[Memory], vectors: Sequence | None, *, gap: timedelta,
            cuts: Iterable[tuple[datetime, str]] = (), end: str | None = None,
            threshold: float = TOPIC_THRESHOLD) -> list[Segment]:
    """Cut turns (oldest first) into segments: at a silence longer than `gap` (time-gap), at each
    (time, reason) in `cuts` (a `chat --clear`: turns before the time, turns from it on), and at
    topic shifts inside what is left (vectors: one per turn; None: no topic cuts). The last
    segment ends with `end` (None: it is still open)."""
    if not turns:
        return []
    forced = sorted(cuts)
    pieces: list[tuple[int, int, str]] = []  # (start, stop, why it ended)
    start = 0
    for i in range(1, len(turns)):
        before, after = turns[i - 1].created_at, turns[i].created_at
        reason = next((why for moment, why in forced if before < moment <= after), None)
        if reason:
            pieces.append((start, i, reason))
            start = i
        elif after - before > gap:
            pieces.append((start, i, "time-gap"))
            start = i
    pieces.append((start, len(turns), ""))
    segments: list[Segment] = []
    for start, stop, why in pieces:
        cuts = topic_cuts(vectors[start:stop], threshold) if vectors is not None else []
        bounds = [start, *(start + c for c in cuts), stop]
        for a, b in zip(bounds, bounds[1:]):
            segments.append(Segment(turns[a:b], "topic-shift" if b != stop else (why or None)))
    segments[-1].boundary = end if segments[-1].boundary is None else segments[-1].boundary
    return segments


# -- the files -----------------------------------------------------------------------------------


def live_episodes(vault, conversation: str) -> list[Memory]:
    """The conversation's live episodes, oldest first."""
    found = list(vault.iter_memories(conversation, roles=("episode",)))
    found.sort(key=lambda m: (_time(m, "started_at") or m.created_at, m.id))
    return found


def _time(memory: Memory, key: str) -> datetime | None:
    try:
        return files.parse_time(memory.extra[key]) if memory.extra.get(key) else None
    except ValueError:
        return None


def answered_turns(vault, conversation: str) -> list[Memory]:
    """The conversation's live turns in order, without user turns whose reply never came."""
    from memvault.learning import sessions

    return [t for t in sessions._turns(vault, conversation) if not sessions.is_unanswered(t)]


def turn_vectors(index, conversation: str, turns: list[Memory]) -> list:
    """One embedding per turn: the index's own where it has the turn, else embedded now."""
    if not turns:
        return []
    stored = index.vectors(("user", "assistant"), conversation)
    missing = [t.text for t in turns if t.id not in stored]
    fresh = iter(index.embedder.embed_as_queried(missing)) if missing else iter(())  # a message searched just now
    return [stored[t.id] if t.id in stored else next(fresh) for t in turns]


def transcript(turns: list[Memory], limit: int = MAX_TRANSCRIPT_CHARS) -> str:
    """`user: ...` / `assistant: ...` lines; a long one keeps its start and its end."""
    lines = []
    for turn in turns:
        text = " ".join(turn.text.split())
        lines.append(f"{turn.role}: {text if len(text) <= 800 else text[:800] + ' …'}")
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    return text[: limit // 2].rsplit("\n", 1)[0] + "\n[…]\n" + text[-limit // 2:].split("\n", 1)[-1]


def plain_record(turns: list[Memory]) -> tuple[str, str]:
    """A title and narrative made without a model: the first words the user said, and what they said."""
    said = [" ".join(t.text.split()) for t in turns if t.role == "user"] or [" ".join(turns[0].text.split())]
    words = said[0].split()
    title = " ".join(words[:8]) + ("…" if len(words) > 8 else "")
    narrative = " ".join(f"The user said: {s if len(s) <= 160 else s[:159] + '…'}" for s in said[:3])
    if len(said) > 3:
        narrative += f" ({len(said) - 3} more message{'s' if len(said) > 4 else ''})"
    return title, narrative


def model_record(cfg, turns: list[Memory]) -> tuple[str, str] | None:
    """The model's (title, narrative) for the turns, cleaned; None when it answered nothing usable.
    LLMError propagates."""
    import pydantic

    from memvault.learning import prompts
    from memvault.store.llm import structured

    class Record(pydantic.BaseModel):
        title: str = pydantic.Field(json_schema_extra={"maxLength": 80})
        narrative: str = pydantic.Field(json_schema_extra={"maxLength": 600})

    answer = structured(cfg, prompts.episode_messages(transcript(turns)), Record)
    if answer is None:
        return None
    title, narrative = " ".join(answer.title.split()).strip(" .\"'"), " ".join(answer.narrative.split())
    return (title[:80], narrative) if title and narrative else None


def write_record(cfg, turns: list[Memory], warn: Callable[[str], None] | None = None) -> tuple[str, str, bool]:
    """(title, narrative, made by the model) for an episode's turns. A model that fails, answers
    garbage or writes what the turns do not say (`grounding`: the prompt's example copied, or a
    story of its own) leaves the plain record (`plain_record`): the episode is written all the
    same. A title with no word of the turns in it gives way to the plain title."""
    from memvault.errors import LLMError

    try:
        record = model_record(cfg, turns)
    except LLMError as exc:
        if warn:
            warn(f"memvault: warning: episode narrative not written by the model: {exc}")
        record = None
    plain_title, plain_narrative = plain_record(turns)
    if record is None:
        return plain_title, plain_narrative, False
    title, narrative = record
    if not grounding(narrative, turns).grounded:
        if warn:
            warn(f"memvault: warning: the model's episode narrative is not in its turns ({narrative[:80]!r}); "
                 "the plain record stands")
        return plain_title, plain_narrative, False
    if not grounding(title, turns).touches:
        title = plain_title
    return title, narrative, True


# -- grounding: is what the model wrote in the turns? -----------------------------------------------
# The 1.5B model, given "My son Tom starts school in September." / "Exciting! Is it a local primary
# school?", answered the prompt's own example ("Planning a move to Lisbon: The user said they will
# move to Lisbon in May. ..."). So the content words of a title or narrative are looked up in the
# turns (a crude stem: "moving" finds "move"); a narrative whose words are mostly absent is not
# stored, nor a title without one word of the turns. Words every record uses ("the user asked",
# "the assistant suggested") are no content. Measured on LoCoMo sessions and short conversations
# (bench/episode_grounding.py, bench/README.md).
MIN_GROUNDED = 0.5
# Every example an episode prompt has shown: a record that repeats one the turns do not is copied,
# whatever its share.
PROMPT_EXAMPLES = (
    "Planning a move to Lisbon. The user said they will move to Lisbon in May. "
    "The assistant suggested three neighbourhoods.",
)
_RECORD_WORDS = frozenset(
    """the a an and or but nor so yet for of to in on at by with from into onto about over under after before
    between during through without within again also just only very too then than there here this that these
    those it its they them their theirs he him his she her hers we us our you your i me my mine who whom whose
    which what when where why how all any some each every both either neither other another such same own more
    most much many few lot lots not no yes is are was were be been being am do does did done have has had having
    will would can could should shall may might must user users assistant assistants said says say saying asked
    asks ask asking told tells tell talked talks talk discussed discusses discuss discussion mentioned mentions
    mention shared shares share suggested suggests suggest suggestion recommended recommends recommend explained
    explains explain answered answers answer replied replies reply responded responds response provided provides
    gave gives give offered offers conversation chat topic part wanted wants want let lets like well one whether if""".split()
)


@dataclass
class Grounding:
    """How much of a text the turns say: its content words, those found, and the prompt example."""

    words: int
    found: int
    copied: bool

    @property
    def share(self) -> float:
        return self.found / self.words if self.words else 0.0

    @property
    def grounded(self) -> bool:
        """A narrative: at least MIN_GROUNDED of its content words in the turns."""
        return not self.copied and self.words > 0 and self.share >= MIN_GROUNDED

    @property
    def touches(self) -> bool:
        """A title, which names the topic in words of its own ("Knee pain advice" for "My knee hurts
        after running"): at least one of its content words in the turns."""
        return not self.copied and self.found > 0


def _stem(word: str) -> str:
    """A crude stem, enough to find "planned" in "plan" and "families" in "family"."""
    word = re.sub(r"'s$|'$", "", word.lower().replace("\u2019", "'"))
    if re.fullmatch(r"\d+(?:st|nd|rd|th)", word):  # "90th" is "90"
        return word.rstrip("stndrh")
    if len(word) > 3:
        word = re.sub(r"(?:ing|ed|es|s|e|ly)$", "", re.sub(r"ie[sd]$", "y", word))
        word = re.sub(r"([b-df-hj-np-tv-z])\1$", r"\1", word)  # "plann" -> "plan"
    return word[:5]


def _content(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[^\W_][\w'\u2019-]*", text)
            if w.lower() not in _RECORD_WORDS and (len(w) > 2 or w.isdigit())}


def _names(text: str) -> set[str]:
    """Capitalised words not opening a sentence: "Lisbon", "May"."""
    return {m.group(1).lower() for m in re.finditer(r"(?<![.!?:]\s)(?<!^)\b([A-Z][a-z]+)", text)}


def grounding(text: str, turns: list[Memory]) -> Grounding:
    """Whether `text` (a title or narrative) is about what the turns say. Copied: it repeats two
    content words of a prompt example ("three neighbourhoods"), or one of its names ("Lisbon"),
    that the turns do not say."""
    said_text = " ".join(t.text for t in turns)
    said = _content(said_text)
    words = _content(text)
    copied = any(len((words & (example := _content(e))) - said) >= min(2, len(example))
                 or (_names(text) & _names(e)) - {w.lower() for w in re.findall(r"\w+", said_text)}
                 for e in PROMPT_EXAMPLES)
    return Grounding(len(words), len(words & said), bool(copied))


def new_episode(conversation: str, segment: Segment, title: str, narrative: str, by_model: bool,
                now: datetime | None = None) -> Memory:
    """The episode's memory (not written yet); created when it ended, so it sorts with its turns."""
    extra: dict[str, Any] = {
        "title": title,
        "started_at": files.format_time(segment.started_at),
        "ended_at": files.format_time(segment.ended_at),
        "turn_ids": [t.id for t in segment.turns],
        "boundary": segment.boundary or "closed",
        files.ORIGIN_KEY: "episode",
    }
    if not by_model:
        extra["narrative_fallback"] = True
    if now is not None:
        extra["written_at"] = files.format_time(now)
    return files.new_memory(narrative, "episode", conversation, created_at=segment.ended_at, extra=extra)


# -- closing episodes ------------------------------------------------------------------------------


@dataclass
class Closed:
    """One episode written: its memory, its turns, and what learning did for it."""

    episode: Memory
    segment: Segment
    extraction: str = "none"  # "none" (message mode), "predict-calibrate", "message" (the fallback)
    learned: Any = None  # learn.Learned
    prediction: list[str] = field(default_factory=list)

    def to_json(self, root=None) -> dict[str, Any]:
        return {**episode_json(self.episode, root), "extraction": self.extraction,
                "prediction": self.prediction, "learned": self.learned.to_json() if self.learned else []}


def episode_json(episode: Memory, root=None) -> dict[str, Any]:
    meta = episode.extra
    return {"id": episode.id, "conversation_id": episode.conversation_id, "title": meta.get("title"),
            "narrative": episode.text, "started_at": meta.get("started_at"), "ended_at": meta.get("ended_at"),
            "turns": len(meta.get("turn_ids") or []), "boundary": meta.get("boundary"),
            "path": episode.path.relative_to(root).as_posix() if root and episode.path else None}


def pending_segments(vault, conversation: str, now: datetime, end: str | None = None,
                     turns: list[Memory] | None = None) -> list[Segment]:
    """The open turns cut into segments: all but the last are closed; the last is closed too when
    `end` says why, or when it has been quiet past soft_decay_minutes."""
    from memvault.learning import sessions

    turns = open_turns(vault, conversation) if turns is None else turns
    if not turns:
        return []
    settings = vault.settings
    gap = timedelta(minutes=settings.soft_decay_minutes)
    record = files.read_optional(sessions.session_path(vault, conversation), vault.root)
    start = sessions._time(record, "session_start")
    cuts = [(start, "session-clear")] if start is not None else []
    segments = segment(turns, turn_vectors(vault.index, conversation, turns), gap=gap, cuts=cuts, end=end)
    if segments[-1].boundary is None and start is not None and start > segments[-1].ended_at:
        segments[-1].boundary = "session-clear"  # cleared after these turns (a close that failed then)
    elif segments[-1].boundary is None and now - segments[-1].ended_at > gap:
        segments[-1].boundary = "time-gap"
    return segments


def close(vault, cfg, conversation: str, *, now: datetime, refresh: Callable[[], Any], end: str | None = None,
          extract: bool = True, warn: Callable[[str], None] | None = None, command: str = "episodes",
          segments: list[Segment] | None = None, limit: int | None = None) -> list[Closed]:
    """Write every episode of the conversation that has closed (see `pending_segments`), oldest
    first, each in one commit with what was learned from it.

    extract: in extraction_mode predict-calibrate, learn from each closed episode (learn.plan_episode;
    the per-message path when the model gives no valid answer). An LLMError from learning stops
    here: that episode and the later ones stay open, so nothing is lost and the next close retries.
    refresh: brings the index in step with the files (facts learned from one episode or message
    are candidates for the next); command: the command named in the commits; limit: at most this
    many, the oldest (the rest stay for the next close)."""
    from memvault.learning.learn import Learner

    settings = vault.settings
    segments = pending_segments(vault, conversation, now, end) if segments is None else segments
    done: list[Closed] = []
    for part in [s for s in segments if s.boundary is not None][:limit]:
        title, narrative, by_model = write_record(cfg, part.turns, warn)
        episode = new_episode(conversation, part, title, narrative, by_model, now)
        closed = Closed(episode, part)
        learner = Learner(vault, cfg, command, warn=warn, refresh=refresh)
        plans = []
        if extract and settings.extraction_mode == "predict-calibrate":
            plan = learner.plan_episode([t for t in part.turns if t.role == "user"], conversation, episode.id)
            if plan is not None:
                closed.extraction, closed.prediction, plans = "predict-calibrate", plan.prediction, [plan]
            else:
                closed.extraction = "message"
                if warn:
                    warn(f"memvault: predict-calibrate gave no valid answer for episode \"{title}\"; "
                         "learning from each message instead")
        if closed.extraction == "message":  # one commit per message, as `add --extract` makes them
            for turn in [t for t in part.turns if t.role == "user"]:
                learner.message(turn.text, conversation, now=turn.created_at, turn=turn, episode_id=episode.id,
                                commit_empty=False, mark=True, title=f"facts from a turn of {conversation}")
        with vault.change(command) as change:
            change.add(episode)
            for plan in plans:
                learner.store(change, plan, part.ended_at)
                learner.mark(change, [t for t in part.turns if t.role == "user"])
            learner.flush(change)  # the turns that taught nothing are marked with the episode
            change.title = f"episode \"{title}\" ({conversation})"
        closed.learned = learner.learned if closed.extraction != "none" else None
        done.append(closed)
    return done



# -- reading: results with their episode -----------------------------------------------------------


# -- rebuilding ------------------------------------------------------------------------------------


@dataclass
class Rebuilt:
    """What `episodes --rebuild` did to the turns already covered by episodes."""

    written: list[Memory] = field(default_factory=list)
    replaced: list[tuple[Memory, Memory]] = field(default_factory=list)  # (old episode, the new one)
    segments: list[Segment] = field(default_factory=list)


def rebuild(vault, cfg, conversation: str, *, dry_run: bool = False, now: datetime,
            warn: Callable[[str], None] | None = None, command: str = "episodes") -> Rebuilt:
    """Cut the turns the live episodes cover again, write the new episodes and soft-delete the old
    ones (`replaced_by`: the new episode sharing most turns with it), in one commit; facts that named
    an old episode name its successor. Nothing is learned again: those turns were learned from.
    Where an old episode ended on a clear, an explicit close or an import's end, the new ones do too."""
    old = live_episodes(vault, conversation)
    out = Rebuilt()
    if not old:
        return out
    last = max(old, key=ended_at)
    covered = [t for t in answered_turns(vault, conversation) if t.created_at <= ended_at(last)]
    if not covered:
        return out
    forced = [(ended_at(e) + timedelta(microseconds=1), e.extra.get("boundary"))
              for e in old if e.extra.get("boundary") in KEPT_CUTS and e is not last]
    out.segments = segment(covered, turn_vectors(vault.index, conversation, covered),
                           gap=timedelta(minutes=vault.settings.soft_decay_minutes), cuts=forced,
                           end=last.extra.get("boundary") or "closed")
    if dry_run:
        return out
    for part in out.segments:
        title, narrative, by_model = write_record(cfg, part.turns, warn)
        out.written.append(new_episode(conversation, part, title, narrative, by_model, now))
    successor: dict[str, Memory] = {}
    for episode in old:
        ids = set(episode.extra.get("turn_ids") or [])
        successor[episode.id] = max(out.written, key=lambda new: (len(ids & set(new.extra["turn_ids"])),
                                                                   -abs((new.created_at - ended_at(episode)).total_seconds())))
    with vault.change(command) as change:
        for episode in out.written:
            change.add(episode)
        for episode in old:
            current = files.still_live(change.root, episode.path, episode.id)
            if current is not None:
                change.soft_delete(current, "update", replaced_by=successor[episode.id], now=now)
                out.replaced.append((current, successor[episode.id]))
        for fact in vault.iter_memories(conversation, roles=("memory",)):
            named = str(fact.extra.get("episode_id") or "")
            if named in successor:
                fact.extra["episode_id"] = successor[named].id
                change.rewrite(fact)
        change.title = f"{len(out.written)} episodes rebuilt ({conversation})"
    return out


@dataclass
class EpisodesOutcome:
    """A conversation's episodes (`memvault episodes`): the live ones, oldest first; the turns not in
    one yet, cut as they would be (`pending`: the closed segments, then the open one); and what this
    call wrote (`closed`: Closed) or replaced (`rebuilt`: Rebuilt)."""

    conversation: str
    episodes: list[Memory]
    pending: list = field(default_factory=list)  # Segment
    closed: list = field(default_factory=list)  # Closed
    rebuilt: Any = None
    dry_run: bool = False

    def to_json(self, root=None) -> dict[str, Any]:
        return {"conversation_id": self.conversation, "dry_run": self.dry_run,
                "episodes": [episode_json(e, root) for e in self.episodes],
                "pending": [{"started_at": files.format_time(s.started_at), "ended_at": files.format_time(s.ended_at),
                             "turns": len(s.turns), "boundary": s.boundary} for s in self.pending],
                "closed": [c.to_json(root) for c in self.closed],
                "replaced": [{"id": old.id, "replaced_by": new.id} for old, new in
                             (self.rebuilt.replaced if self.rebuilt else [])]}


def look_over(vault, cfg, conversation: str, *, now: datetime, refresh: Callable[[], Any],
              warn: Callable[[str], None], close_open: bool = False, rebuild_them: bool = False,
              dry_run: bool = False) -> EpisodesOutcome:
    """`Memvault.episodes`: the conversation's episodes, every one that has closed written now (learned
    from in predict-calibrate); close_open: the open one too; rebuild_them: cut the covered turns again
    (rebuild); dry_run: say what would be written, call no model, write nothing."""
    refresh()
    outcome = EpisodesOutcome(conversation, [], dry_run=dry_run)
    if rebuild_them:
        outcome.rebuilt = rebuild(vault, cfg, conversation, dry_run=dry_run, now=now, warn=warn)
        if not dry_run:
            refresh()
    outcome.pending = pending_segments(vault, conversation, now, "closed" if close_open else None)
    if not dry_run and any(s.boundary for s in outcome.pending):
        outcome.closed = close(vault, cfg, conversation, now=now, refresh=refresh, warn=warn, segments=outcome.pending)
        outcome.pending = [s for s in outcome.pending if s.boundary is None]
    outcome.episodes = live_episodes(vault, conversation)
    return outcome


def close_or_warn(vault, cfg, conversation: str, *, now: datetime, end: str | None, command: str,
                  refresh: Callable[[], Any], warn: Callable[[str], None], strict: bool = False) -> list:
    """close, with its error policy: a model that fails is a warning (strict: the LLMError is raised);
    the turns stay, and the next close (a chat, `memvault episodes`) takes them up."""
    from memvault.errors import LLMError

    if not vault.exists():
        return []
    refresh()
    try:
        return close(vault, cfg, conversation, now=now, end=end, refresh=refresh, warn=warn, command=command)
    except LLMError as exc:
        if strict:
            raise
        warn(f"memvault: warning: episode not closed, the turns wait for the next close: {exc}")
        return []
