#!/usr/bin/env python3
"""Episodes grounded in their turns (issue 26, case 6): how often the model's record is copied or
invented, and how often the grounding check (episodes.grounding) rejects a good one.

Each conversation's turns go to the model exactly as `episodes` sends them (episodes.model_record:
prompts.EPISODE on the transcript); the record is then checked against the turns. Conversations:
  short    hand-written exchanges of 2-6 turns (the issue's "My son Tom starts school in
           September." among them): where the 1.5B model copied the prompt's example
  locomo   the first sessions of LoCoMo conversations (speaker A the user, B the assistant),
           cut as the product cuts a long transcript
Per record: its content words found in the turns (share), `copied` (a prompt example repeated),
and the verdict. Rejected records are printed in full to be labelled by hand: a rejected record
that tells the conversation truly is a false rejection. The control: each record checked against
the turns of another conversation of its set (an invented story, by construction), per threshold.

--prompt old runs the prompt as it was before issue 26 (a concrete example about a move to
Lisbon), new the shipped one. --rescore FILE checks the records a run saved (--json) again with
the current rules, without asking the model.

Start the local model first:
    ../shared/llm/local-llm.sh start && eval "$(../shared/llm/local-llm.sh env)"
usage: bench/episode_grounding.py [--prompt old|new] [--locomo N] [--json OUT] [--rescore FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from checkout import REPO, git_commit

sys.path.insert(0, str(REPO))

from memvault.learning import episodes, prompts
from memvault.store import files  # noqa: E402
from memvault.errors import LLMError  # noqa: E402
from memvault.store.llm import LLMConfig  # noqa: E402

LOCOMO = REPO.parent / "shared" / "bench" / "locomo" / "locomo_memories.jsonl"
OLD_PROMPT = """\
You write a short record of one part of a conversation between a user and an assistant.
Give a "title" of at most 8 words saying what it was about, and a "narrative" of 1 to 4 \
sentences in the third person ("The user ..."): what the user told, asked or decided, and what \
the assistant answered. Keep names, dates and numbers. Do not invent anything.
Answer with JSON only, like \
{"title": "Planning a move to Lisbon", "narrative": "The user said they will move to Lisbon in \
May. The assistant suggested three neighbourhoods."}"""

SHORT = [
    ["My son Tom starts school in September.", "Exciting! Is it a local primary school?"],
    ["We're spending next weekend in Porto.", "Lovely! Are you going by train or by car?"],
    ["I adopted a kitten yesterday.", "Congratulations! What's her name?", "Pepper. She's grey with white paws.",
     "Pepper suits her. Keep her indoors for the first weeks."],
    ["Can you suggest a dessert without eggs?", "A chocolate avocado mousse needs no eggs at all."],
    ["My knee hurts after running.", "Rest it for a few days and ice it. If it swells, see a doctor."],
    ["What's the boiling point of water at altitude?", "It drops about one degree Celsius per 300 metres."],
    ["I finally passed my driving test!", "Well done! Was it your first attempt?", "Third, actually.",
     "Persistence pays off."],
    ["Help me name my sourdough starter.", "How about Clint Yeastwood or Bread Pitt?", "Bread Pitt it is."],
    ["Our flight to Oslo got cancelled.", "That's annoying. Did the airline rebook you?",
     "Yes, for tomorrow morning."],
    ["I'm reading War and Peace.", "A long one! How far along are you?", "About a third."],
    ["Translate 'good morning' into Italian.", "Buongiorno."],
    ["My grandmother turns 90 on Sunday.", "What a milestone! Are you having a party?",
     "A lunch with the whole family.", "That sounds wonderful."],
    ["Is it safe to give grapes to a dog?", "No, grapes can cause kidney failure in dogs."],
    ["I started a new job at the library.", "Congratulations! What will you be doing there?",
     "Cataloguing rare books."],
    ["Hi!", "Hello! How can I help?"],
    ["The heating in my flat broke.", "Have you told your landlord?", "Yes, someone comes on Monday."],
]


def short_conversations():
    t0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    for number, texts in enumerate(SHORT, 1):
        yield f"short-{number}", [files.new_memory(text, "user" if i % 2 == 0 else "assistant",
                                                   created_at=t0 + timedelta(minutes=i)) for i, text in enumerate(texts)]


def locomo_sessions(count: int):
    sessions = collections.OrderedDict()
    for line in open(LOCOMO, encoding="utf-8"):
        m = json.loads(line)
        sessions.setdefault((m["conv_id"], m["session"]), []).append(m)
    taken, seen_conversations = 0, collections.Counter()
    for (conversation, session), rows in sessions.items():
        if taken >= count or seen_conversations[conversation] >= 2:
            continue
        seen_conversations[conversation] += 1
        taken += 1
        first = rows[0]["speaker"]
        yield f"{conversation}:{session}", [
            files.new_memory(r["text"], "user" if r["speaker"] == first else "assistant",
                             created_at=datetime.fromisoformat(r["created_at"]).replace(tzinfo=timezone.utc))
            for r in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", choices=("old", "new"), default="new")
    ap.add_argument("--locomo", type=int, default=20, help="LoCoMo sessions (two per conversation at most)")
    ap.add_argument("--json", help="write every record here")
    ap.add_argument("--rescore", help="a --json file of an earlier run: check its records again, no model")
    args = ap.parse_args()
    saved = {r["name"]: r for r in json.loads(Path(args.rescore).read_text())} if args.rescore else None
    if saved is None and not os.environ.get("MEMVAULT_LLM_BASE_URL"):
        print('set the LLM first: eval "$(../shared/llm/local-llm.sh env)"', file=sys.stderr)
        return 2
    if args.prompt == "old":
        prompts.EPISODE = OLD_PROMPT
    from memvault.store.config import load_settings

    cfg = LLMConfig.from_settings(load_settings(None)) if saved is None else None
    rows, seconds, turns_of = [], [], {}
    for source, conversations in (("short", short_conversations()), ("locomo", locomo_sessions(args.locomo))):
        for name, turns in conversations:
            turns_of[name] = turns
            started = time.perf_counter()
            if saved is not None:
                if name not in saved:
                    continue
                record = (saved[name]["title"], saved[name]["narrative"]) if saved[name]["record"] else None
            else:
                try:
                    record = episodes.model_record(cfg, turns)
                except LLMError as exc:
                    print(f"  {name}: LLM error {exc}", file=sys.stderr)
                    continue
            seconds.append(time.perf_counter() - started)
            if record is None:
                rows.append({"name": name, "source": source, "record": None})
                print(f"  {name}: no valid answer", file=sys.stderr)
                continue
            title, narrative = record
            checks = {part: episodes.grounding(text, turns) for part, text in (("title", title), ("narrative", narrative))}
            row = {"name": name, "source": source, "title": title, "narrative": narrative, "record": True,
                   **{f"{part}_share": round(g.share, 2) for part, g in checks.items()},
                   **{f"{part}_copied": g.copied for part, g in checks.items()},
                   "narrative_kept": checks["narrative"].grounded, "title_kept": checks["title"].touches}
            rows.append(row)
            verdict = "kept" if row["narrative_kept"] else ("COPIED" if row["narrative_copied"] else "REJECTED")
            print(f"  {name:<14} {seconds[-1]:5.1f}s narrative {row['narrative_share']:.2f} {verdict:<8} "
                  f"title {row['title_share']:.2f}{'' if row['title_kept'] else ' (plain title)'} "
                  f"{title!r}: {narrative!r}", file=sys.stderr)

    print(f"episode grounding: --prompt {args.prompt}{' --rescore ' + args.rescore if saved else ''}, model {os.environ.get('MEMVAULT_LLM_MODEL', '?')}, "
          f"commit {git_commit()}, load {os.getloadavg()[0]:.1f}, MIN_GROUNDED {episodes.MIN_GROUNDED}")
    print(f"{'set':<8} {'records':>7} {'no answer':>9} {'copied':>6} {'rejected':>8} {'kept':>5} "
          f"{'titles replaced':>15} {'share median (min)':>18}")
    for source in ("short", "locomo"):
        mine = [r for r in rows if r["source"] == source]
        answered = [r for r in mine if r["record"]]
        shares = [r["narrative_share"] for r in answered]
        print(f"{source:<8} {len(mine):>7} {len(mine) - len(answered):>9} "
              f"{sum(r['narrative_copied'] or r['title_copied'] for r in answered):>6} "
              f"{sum(not r['narrative_kept'] for r in answered):>8} {sum(r['narrative_kept'] for r in answered):>5} "
              f"{sum(r['narrative_kept'] and not r['title_kept'] for r in answered):>15} "
              f"{(f'{statistics.median(shares):.2f} ({min(shares):.2f})' if shares else '-'):>18}")
    print(f"seconds per record: median {statistics.median(seconds):.1f}" if seconds else "")
    # The control, without the model: each record against the turns of another conversation of its
    # set, a story those turns never told. Accepted there = what the check would let an invention through.
    print(f"{'threshold':>9} {'good kept (short, locomo)':>26} {'control accepted (short, locomo)':>33}")
    answered = [r for r in rows if r["record"]]
    for threshold in (0.25, 0.33, 0.4, 0.5, 0.6):
        kept, accepted = [], []
        for source in ("short", "locomo"):
            mine = [r for r in answered if r["source"] == source]
            kept.append(f"{sum(r['narrative_share'] >= threshold and not r['narrative_copied'] for r in mine)}/{len(mine)}")
            control = []
            for i, r in enumerate(mine):  # the next record of another conversation (LoCoMo: other people)
                other = next((o for o in mine[i + 1:] + mine[:i] if o["name"].split(":")[0] != r["name"].split(":")[0]), None)
                if other is not None:
                    control.append(episodes.grounding(r["narrative"], turns_of[other["name"]]))
            accepted.append(f"{sum(g.share >= threshold and not g.copied for g in control)}/{len(control)}")
        print(f"{threshold:>9} {', '.join(kept):>26} {', '.join(accepted):>33}")
    rejected = [r for r in rows if r["record"] and not r["narrative_kept"]]
    if rejected:
        print("rejected (label by hand: a true account of its conversation is a false rejection):")
        for r in rejected:
            print(f"  {r['name']}: share {r['narrative_share']}, copied {r['narrative_copied']}: "
                  f"{r['title']!r}: {r['narrative']!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
