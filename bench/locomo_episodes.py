#!/usr/bin/env python3
"""LoCoMo retrieval with episodes (issue 16): each LoCoMo session an episode.

The vaults are bench/locomo.py's (one per conversation, a chat turn per LoCoMo turn, `memory_id`
in the front matter); each session of a conversation becomes one episode file (role `episode`, turn_ids =
the session's memories, a title and narrative) and is indexed like any entry. Then every question
is searched in-process through `Memvault.search` (the library call the CLI makes, k = 25, the clock
at the question's query_now), and the ranked turns scored with locomo_score.py, in these variants:

  turns only           episodes left out of the candidates (`kinds=["turn"]`): the baseline
  episodes in index    episodes compete for the same k slots; an episode is not a turn, so it
                       scores nothing itself (what an episode costs the turns)
  + bring along        each episode in the results stands for its BRING best turns (cosine with
                       the question), in its place, before the turns ranked after it
  grouped              the results of "episodes in index", turns grouped under their episode
                       (the groups in the order of their best result, as the prompt block shows
                       them), then the rest
  grouped + bring      both

Narratives (--narratives): `model` (the configured LLM writes them, as `episodes` does; cached
in the work folder), `plain` (memvault's model-free fallback: the first words said) or `gold`
(LoCoMo's own session summaries: what a perfect narrative could add).

usage: bench/locomo_episodes.py [--narratives model|plain|gold] [--conversations conv-26,...]
                                [--max-questions N] [--bring 2] [--workdir DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import sqlite3
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import locomo  # noqa: E402  (bench/locomo.py: loading, vault building, scoring)

K = 25
VARIANTS = ("turns only", "episodes in index", "+ bring along", "grouped", "grouped + bring")


def gold_summaries(data: Path) -> dict[tuple[str, int], str]:
    out = {}
    for sample in json.loads((data / "locomo_dev.json").read_text(encoding="utf-8")):
        for key, text in (sample.get("session_summary") or {}).items():
            number = int(key.split("_")[1])
            out[(sample["sample_id"], number)] = text
    return out


def narratives(kind: str, sessions, workdir: Path, data: Path, log) -> dict[tuple[str, int], tuple[str, str]]:
    """(title, narrative) per (conversation, session)."""
    from memvault.learning import episodes
    from memvault.store import files

    out: dict[tuple[str, int], tuple[str, str]] = {}
    if kind == "gold":
        gold = gold_summaries(data)
        for key, turns in sessions.items():
            text = gold.get(key) or ""
            out[key] = (" ".join(text.split()[:8]), text)
        return out
    cache_path = workdir / f"narratives-{kind}.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    cfg = None
    if kind == "model":
        from memvault.store.config import load_settings
        from memvault.store.llm import LLMConfig

        cfg = LLMConfig.from_settings(load_settings(None))
    started = time.perf_counter()
    for number, (key, turns) in enumerate(sorted(sessions.items()), 1):
        name = f"{key[0]}:{key[1]}"
        if name not in cache:
            memories = [files.new_memory(t["content"], "user", created_at=_time(t["created_at"])) for t in turns]
            if kind == "plain":
                title, narrative = episodes.plain_record(memories)
                by_model = False
            else:
                title, narrative, by_model = episodes.write_record(cfg, memories, warn=log)
            cache[name] = [title, narrative, by_model]
            cache_path.write_text(json.dumps(cache, indent=1))
            if kind == "model":
                log(f"narrative {number}/{len(sessions)} {name}: {title!r} "
                    f"({time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f})")
        out[key] = tuple(cache[name][:2])
    return out


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(tzinfo=timezone.utc)


def write_episodes(vault_path: Path, conv: str, sessions, records, log) -> None:
    """Replace the vault's episode files with one per session of `conv`."""
    from memvault.store import files
    from memvault.store.vault import Vault

    vault = Vault.open(vault_path)
    by_memory_id = {m.extra.get("memory_id"): m for m in vault.iter_memories(roles=("user", "assistant"))}
    old = list(vault.iter_memories(roles=("episode",)))
    with vault.change("bench") as change:
        for episode in old:
            change.take_out(episode, show=False)
        for (c, number), turns in sorted(sessions.items()):
            if c != conv:
                continue
            title, narrative = records[(c, number)]
            members = [by_memory_id[t["memory_id"]] for t in turns if t["memory_id"] in by_memory_id]
            extra = {"title": title or f"session {number}", "started_at": files.format_time(members[0].created_at),
                     "ended_at": files.format_time(members[-1].created_at), "turn_ids": [m.id for m in members],
                     "boundary": "time-gap", "origin": "episode", "session": number}
            change.add(files.new_memory(narrative or title or f"session {number}", "episode", conv,
                                        created_at=members[-1].created_at, extra=extra))
    log(f"{conv}: {len(old)} old episodes out, {sum(1 for c, _ in sessions if c == conv)} written")


def ranked(results, mode: str, bring: int, turn_rows, query_vector) -> list[str]:
    """The memory_ids a variant ranks, best first."""
    import numpy as np

    def best_turns(result, taken: set[str]) -> list[str]:
        ids = [i for i in (result.episode or {}).get("turn_ids", []) if i in turn_rows]
        ids.sort(key=lambda i: -float(np.dot(turn_rows[i][1], query_vector)))
        return [turn_rows[i][0] for i in ids if turn_rows[i][0] not in taken][:bring]

    order: list = list(results)
    if mode.startswith("grouped"):
        groups: dict[str, list] = collections.OrderedDict()
        rest = []
        for r in results:
            (groups.setdefault(r.episode["id"], []) if r.episode else rest).append(r)
        # An episode result heads its group: put it first within the group.
        order = [r for members in groups.values() for r in sorted(members, key=lambda r: r.role != "episode")] + rest
    out: list[str] = []
    for r in order:
        if r.role == "episode":
            if mode in ("+ bring along", "grouped + bring"):
                out += best_turns(r, set(out))  # promoted: a turn ranked later is not repeated there
            continue
        memory_id = r.meta.get("memory_id")
        if memory_id and memory_id not in out:
            out.append(memory_id)
    return out


def turn_count(vault: Path) -> int:
    """locomo.vault_count without the episode files this script adds, so a vault is reused."""
    try:
        with sqlite3.connect(f"file:{vault / '.memvault' / 'state.db'}?mode=ro", uri=True) as db:
            known = [row[0] for row in db.execute("SELECT path FROM files WHERE live = 1")]
    except sqlite3.Error:
        return -1
    return sum(1 for path in known if "/episodes/" not in path)


def main() -> int:
    import numpy as np

    import memvault
    from memvault.learning import episodes

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    ap.add_argument("--narratives", choices=("model", "plain", "gold"), default="plain")
    ap.add_argument("--conversations", default=None)
    ap.add_argument("--max-questions", type=int, default=None)
    ap.add_argument("--bring", type=int, default=2, help="turns an episode brings along (default 2)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/memvault-locomo-episodes"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    named = {"tuning": list(locomo.TUNING), "untouched": list(locomo.UNTOUCHED)}
    conversations = (named.get(args.conversations) or args.conversations.split(",")) if args.conversations else None
    memories, queries = locomo.load(args.data, conversations, args.max_questions)
    sessions: dict[tuple[str, int], list[dict]] = collections.defaultdict(list)
    for conv, turns in memories.items():
        for t in turns:
            sessions[(conv, t["session"])].append(t)
    args.workdir.mkdir(parents=True, exist_ok=True)
    locomo.clean_environment()
    locomo.vault_count = turn_count
    vaults = locomo.build_vaults(memories, args.workdir, reuse=True, full_reindex=False, log=log)
    records = narratives(args.narratives, sessions, args.workdir, args.data, log)
    runs = {v: {} for v in VARIANTS}
    seconds = collections.Counter()
    for conv, items in queries.items():
        path = Path(vaults[conv]["vault"])
        write_episodes(path, conv, sessions, records, log)
        vault = memvault.open_vault(path)
        index = vault.vault.index
        vault.warm()
        turn_rows = {}
        for row in index.rows(["id", "meta", "vector"], ("user", "assistant")):
            vector = np.asarray(row["vector"], dtype=np.float32)
            turn_rows[row["id"]] = (json.loads(row["meta"])["memory_id"], vector / (np.linalg.norm(vector) or 1.0))
        for q in items:
            start = time.perf_counter()
            base = vault.search(q["question"], top_k=K, now=q["query_now"], kinds=["turn"], conversation=conv)
            seconds["turns only"] += time.perf_counter() - start
            runs["turns only"][q["qid"]] = [r.meta.get("memory_id") for r in base.results]
            start = time.perf_counter()
            found = vault.search(q["question"], top_k=K, now=q["query_now"], conversation=conv)
            seconds["episodes in index"] += time.perf_counter() - start
            for result in found.results:  # the episode's turns, for bring-along and grouping
                if result.episode is not None:
                    result.episode = {**result.episode,
                                      "turn_ids": _turn_ids(index, result.episode["id"])}
            query_vector = np.asarray(index.embedder.embed_query(q["question"]), dtype=np.float32)
            for variant in VARIANTS[1:]:
                runs[variant][q["qid"]] = ranked(found.results, variant, args.bring, turn_rows, query_vector)
        log(f"{conv}: {len(items)} questions")
    report = {"meta": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": locomo.git_commit(),
                       "narratives": args.narratives, "bring": args.bring, "k": K,
                       "questions": sum(len(v) for v in queries.values()), "load": os.getloadavg()[0],
                       "topic_threshold": episodes.TOPIC_THRESHOLD}, "variants": {}}
    rows = []
    for variant in VARIANTS:
        tag = "episodes-" + variant.replace(" ", "-").replace("+", "plus")
        splits = locomo.score_splits(runs[variant], queries, {}, args.data, args.workdir, tag)
        report["variants"][variant] = {"splits": splits}
        for split, head in splits.items():
            rows.append((variant, split, head, seconds.get(variant, 0.0) if split == "all" or len(splits) == 1 else 0.0))
    out = args.out or HERE / "out" / f"locomo-episodes-{args.narratives}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    n = report["meta"]["questions"]
    print(f"LoCoMo with sessions as episodes, narratives {args.narratives}, bring {args.bring}, {n} questions, "
          f"k = {K}, load {os.getloadavg()[0]:.1f}")
    print(locomo.fmt_table(rows, n, ""))
    print(f"wrote {out}")
    return 0


_EPISODE_TURNS: dict[str, list[str]] = {}


def _turn_ids(index, episode_id: str) -> list[str]:
    if episode_id not in _EPISODE_TURNS:
        for row in index.rows(["id", "meta"], ("episode",)):
            _EPISODE_TURNS[row["id"]] = json.loads(row["meta"]).get("turn_ids") or []
    return _EPISODE_TURNS.get(episode_id, [])


if __name__ == "__main__":
    sys.exit(main())
