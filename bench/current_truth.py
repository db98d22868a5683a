"""The current-truth set (issue 29, measure 1): does search put the current value first, and does
a question about the past still find the old one?

bench/current_truth.jsonl holds 80 short multi-session histories (moves, jobs, partners, pets,
preferences, plans made then cancelled, numbers that change), written before any ranking change
was measured on them. Each is chat turns with dates in a conversation of its own (`ct-<id>`), and:

- mode `learned` (18): the old value was learned as a fact from its turn and the change replaced
  it, written as learning writes it (the old fact `origin: learned`, `learned_from` its turn; the
  new one learned from the change's turn; the old one soft-deleted, `contradiction`, `replaced_by`
  the new one);
- mode `proposal` (8): the old value is a fact the user added (`global`, no origin); the change,
  said in the conversation, was learned as a proposal (`would_replace` naming the user's fact,
  which stays live: issue 26's policy);
- mode `turns` (19 + 13 + 6): nothing learned, the change is only said in turns;
- mode `plain` (10 + 6): nothing learned, two plain memories the user added (`global`, role memory), the
  later one saying the change ("My sister Lena lives in Porto", months later "My sister Lena moved
  to Lisbon"), in a vault of their own (so that the other histories see no global facts of theirs).

The 23 histories marked `"added": "issue 45"` (13 `turns`, 10 `plain`) were written for issue 45
before its rules were (the rules were then chosen looking at them and at issue 29's 45); the 12 marked
`"issue 45, held out"` (6 `turns`, 6 `plain`) were written after the rules were fixed and run once.
Each set is counted apart too (`by_set`).

Per history a question about the current value and one about the earlier value, each searched in
its conversation (plus `global`) with the query clock 10 days after the last turn, k = 5 (the
default). A result is evidence of a value when its text holds it (case-insensitive); stale
evidence holds the old value and not the current one.

- current-first: the first result with the current value ranks above every stale one (and there is one);
- earlier found: a result with the old value is among the k for the earlier-value question.

    python bench/current_truth.py [--workdir DIR] [--k 5] [--show] [--ask N]

--ask N: also ask N current-value questions, spread over the set, through `Memvault.ask` (the local
LLM; hold the shared lock: `flock /work/coord/llm.lock python3 bench/current_truth.py --ask 15`) and
count the answers naming the current value, and those naming only the old one. --without-current:
rank as before this step (the "before" row, on the same files).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import memvault
from memvault.store import files

DATA = Path(__file__).with_name("current_truth.jsonl")


def load() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def conversation(item: dict) -> str:
    return f"ct-{item['id']}"


def build(vault_path: Path, items: list[dict]) -> None:
    """Write every history into one vault, as chat and learning would have written it."""
    vault = memvault.open_vault(vault_path)
    lines, where = [], []
    for item in items:
        for s, session in enumerate(item["sessions"]):
            start = files.parse_time(session["at"])
            for t, (role, text) in enumerate(session["turns"]):
                scope = files.DEFAULT_CONVERSATION if item["mode"] == "plain" else conversation(item)
                kind = {"kind": "fact"} if role == "memory" else {"role": role}  # a plain memory, as `add` makes one
                lines.append(json.dumps({"text": text, **kind, "conversation_id": scope,
                                         "created_at": files.format_time(start + timedelta(minutes=t))}))
                where.append((item["id"], s, t))
    added = vault.add_jsonl("\n".join(lines), allow_duplicate=True)
    turn = {key: memory for key, memory in zip(where, added)}
    store = vault._vault
    with store.change("bench current-truth facts") as change:
        for item in items:
            if item["mode"] in ("turns", "plain"):
                continue
            old_spec, new_spec = item["old_fact"], item["new_fact"]
            new_turn = turn[(item["id"], *new_spec["from"])]
            if item["mode"] == "learned":
                old_turn = turn[(item["id"], *old_spec["from"])]
                old = change.add(files.new_memory(old_spec["text"], "memory", conversation(item),
                                                  created_at=old_turn.created_at,
                                                  extra={files.ORIGIN_KEY: "learned", "learned_from": old_turn.id}))
                new = change.add(files.new_memory(new_spec["text"], "memory", conversation(item),
                                                  created_at=new_turn.created_at,
                                                  extra={files.ORIGIN_KEY: "learned", "learned_from": new_turn.id}))
                change.soft_delete(old, "contradiction", replaced_by=new, now=new_turn.created_at)
            else:  # the user's own fact, global, and a learned proposal to replace it
                first = files.parse_time(item["sessions"][0]["at"]) - timedelta(days=60)
                old = change.add(files.new_memory(old_spec["text"], "memory", files.DEFAULT_CONVERSATION,
                                                  created_at=first))
                change.add(files.new_memory(new_spec["text"], "memory", conversation(item),
                                            created_at=new_turn.created_at,
                                            extra={files.ORIGIN_KEY: "learned", "learned_from": new_turn.id,
                                                   "would_replace": [old.id]}))


def holds(text: str, value: str) -> bool:
    return re.search(r"(?<![\w])" + re.escape(value.lower()) + r"(?![\w])", text.lower()) is not None


def clock(item: dict):
    return files.parse_time(item["sessions"][-1]["at"]) + timedelta(days=10)


def judge(vault, item: dict, k: int, show: bool) -> tuple[bool, bool]:
    conv = files.DEFAULT_CONVERSATION if item["mode"] == "plain" else conversation(item)
    now = clock(item)
    current = vault.search(item["current_q"], conversation=conv, now=now, top_k=k).results
    first_current = next((i for i, r in enumerate(current) if holds(r.text, item["current"])), None)
    first_stale = next((i for i, r in enumerate(current) if holds(r.text, item["earlier"])
                        and not holds(r.text, item["current"])), None)
    current_first = first_current is not None and (first_stale is None or first_current < first_stale)
    earlier = vault.search(item["earlier_q"], conversation=conv, now=now, top_k=k).results
    earlier_found = any(holds(r.text, item["earlier"]) for r in earlier)
    if show and not (current_first and earlier_found):
        print(f"-- {item['id']} ({item['mode']}): current-first {current_first}, earlier found {earlier_found}")
        for label, results in (("Q " + item["current_q"], current), ("Q " + item["earlier_q"], earlier)):
            print("  " + label)
            for r in results:
                mark = (getattr(r, "superseded", None) or {}).get("note") or ""
                print(f"    {r.score:.3f} [{r.role}] {r.text[:70]}" + (f"  ({mark})" if mark else ""))
    return current_first, earlier_found


def ask(vault, items: list[dict]) -> dict:
    """The current-value question through Memvault.ask in the history's conversation (10 days after
    its last turn: a fresh chat session, so the history reaches the model only as memories, in the
    injection block): does the answer name the current value, or only the old one?"""
    named = stale_only = 0
    rows = []
    for item in items:
        reply = vault.ask(item["current_q"], conversation=conversation(item), now=clock(item), learn=False).reply
        current, old = holds(reply, item["current"]), holds(reply, item["earlier"])
        named += current
        stale_only += old and not current
        rows.append({"id": item["id"], "mode": item["mode"], "reply": reply[:200], "current": current, "stale": old})
    return {"asked": len(items), "named_current": named, "named_only_the_old": stale_only, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="keep the vault here (default: a temporary folder)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--show", action="store_true", help="print the results of every history that fails")
    parser.add_argument("--ask", type=int, default=0, help="also ask the first N current-value questions of the LLM")
    parser.add_argument("--without-current", action="store_true",
                        help="rank as before issue 29's current-truth step (reading/current.supersede off): "
                             "the 'before' row on the same files")
    args = parser.parse_args(argv)
    items = load()
    if args.without_current:
        from memvault.reading import current

        current.supersede = lambda *a, **k: None
    work = args.workdir or Path(tempfile.mkdtemp(prefix="memvault-current-truth-"))
    vault_path = work / "vault"
    try:
        started = time.perf_counter()
        plain_path = work / "plain"  # the plain memories are global: a vault of their own, so that
        for path in (vault_path, plain_path):  # the conversations' histories see no other global facts
            if path.exists():
                shutil.rmtree(path)
        build(vault_path, [item for item in items if item["mode"] != "plain"])
        build(plain_path, [item for item in items if item["mode"] == "plain"])
        built = time.perf_counter() - started
        vaults = {False: memvault.open_vault(vault_path), True: memvault.open_vault(plain_path)}
        by_mode: dict[str, list[tuple[bool, bool]]] = {}
        judged = [judge(vaults[item["mode"] == "plain"], item, args.k, args.show) for item in items]
        for item, row in zip(items, judged):
            by_mode.setdefault(item["mode"], []).append(row)
        every = [x for rows in by_mode.values() for x in rows]
        report = {"histories": len(items), "k": args.k, "build_seconds": round(built, 1),
                  "current_step": not args.without_current,
                  "current_first": sum(c for c, _ in every), "earlier_found": sum(e for _, e in every),
                  "by_mode": {mode: {"n": len(rows), "current_first": sum(c for c, _ in rows),
                                     "earlier_found": sum(e for _, e in rows)} for mode, rows in by_mode.items()}}
        by_set: dict[str, list[tuple[bool, bool]]] = {}
        for item, row in zip(items, judged):
            by_set.setdefault(item.get("added", "issue 29"), []).append(row)
        report["by_set"] = {name: {"n": len(rows), "current_first": sum(c for c, _ in rows),
                                   "earlier_found": sum(e for _, e in rows)} for name, rows in by_set.items()}
        if args.ask:  # spread over the set: every mode gets its share
            chosen = [items[i * len(items) // args.ask] for i in range(min(args.ask, len(items)))]
            report["ask"] = ask(vaults[False], [item for item in chosen if item["mode"] != "plain"])
        print(json.dumps(report, indent=2))
        print(f"current-first {report['current_first']}/{len(items)} ({report['current_first'] / len(items):.0%}), "
              f"earlier found {report['earlier_found']}/{len(items)} ({report['earlier_found'] / len(items):.0%})")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
