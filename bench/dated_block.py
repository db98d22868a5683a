"""What dating the injection block costs (issues 29 and 45, "Dates in what the model reads").

Builds the block a chat would send for LoCoMo questions (categories 1-4): each question's evidence
turns, then the turns that follow them, up to k results, with the conversation's rolling summary
stand-in (its first session summary). Counts it four ways: as memvault wrote it before issue 29 (no
dates), as issue 29 wrote it (`Today is 2023-10-23 (Monday).`, `[YYYY-MM-DD]` per line, the summary's
date), and as it writes it now, dates in words and relative times resolved, in rank order (each line
dated) and by day (each day headed once: the product's order), with the MiniLM WordPiece tokenizer
the package bundles and by characters / 4. No index, no model: the block's text only, so the numbers
are the same on any machine.

    python bench/dated_block.py [--k 5] [--questions 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import memvault
from memvault.reading.retrieval import INJECTION_HEADER, Result, injection_block
from memvault.store import files, relative_times

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo"


def undated_block(results: list[Result], summary: str | None) -> str:
    """The block as memvault wrote it before issue 29 (no episodes here, so this is all of it)."""
    lines = ["<memory>", INJECTION_HEADER]
    if summary:
        lines += ["", "Conversation summary:", summary.strip()]
    if results:
        lines += ["", "Relevant memories (most relevant first):"]
        lines += [f"[{r.role}] {' '.join(r.text.split())}" for r in results]
    lines.append("</memory>")
    return "\n".join(lines)


def iso_dated_block(results: list[Result], summary: str | None, today, summary_written) -> str:
    """The block as issue 29 wrote it (main before issue 45): ISO days, most relevant first."""
    lines = ["<memory>", INJECTION_HEADER, f"Today is {today:%Y-%m-%d} ({today:%A})."]
    if summary:
        lines += ["", f"Conversation summary (written {files.parse_time(summary_written):%Y-%m-%d}):", summary.strip()]
    if results:
        lines += ["", "Relevant memories (most relevant first, each dated when said or written):"]
        lines += [f"[{files.parse_time(r.created_at):%Y-%m-%d}] [{r.role}] {' '.join(r.text.split())}" for r in results]
    lines.append("</memory>")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=5, help="results per block (default_top_k is 5)")
    parser.add_argument("--questions", type=int, default=200)
    args = parser.parse_args()

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(memvault.__file__).parent / "data" / "minilm-tokenizer" / "tokenizer.json"))
    tokenizer.no_truncation()  # the bundled config cuts at 128 (the embedder's window)
    tokenizer.no_padding()
    tokens = lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)  # noqa: E731

    turns: dict[str, list[dict]] = {}
    for line in (LOCOMO / "locomo_memories.jsonl").read_text().splitlines():
        row = json.loads(line)
        turns.setdefault(row["conv_id"], []).append(row)
    where = {row["memory_id"]: (conv, i) for conv, rows in turns.items() for i, row in enumerate(rows)}
    summaries = {c["sample_id"]: c["session_summary"].get("session_1_summary")
                 for c in json.loads((LOCOMO / "locomo_dev.json").read_text())}

    questions = [json.loads(line) for line in (LOCOMO / "locomo_queries.jsonl").read_text().splitlines()]
    questions = [q for q in questions if q["category"] in (1, 2, 3, 4) and q["evidence_memory_ids"]]
    questions = questions[:: max(1, len(questions) // args.questions)][: args.questions]

    rows = []  # ([tokens per block kind], [characters / 4 per block kind])
    days, resolved = [], []
    for q in questions:
        picked: list[str] = []
        for memory_id in q["evidence_memory_ids"]:
            if memory_id not in where:
                continue
            conv, i = where[memory_id]
            for row in turns[conv][i:]:
                if len(picked) >= args.k:
                    break
                if row["memory_id"] not in picked:
                    picked.append(row["memory_id"])
        if not picked:
            continue
        results = []
        for memory_id in picked[: args.k]:
            conv, i = where[memory_id]
            row = turns[conv][i]
            said_at = files.parse_time(row["created_at"])
            results.append(Result(memory_id, "", "user", conv, row["created_at"], row["content"], {},
                                  told=relative_times.resolve(row["content"], said_at)))
        summary = summaries.get(q["conv_id"])
        today = files.parse_time(q["query_now"])
        blocks = (undated_block(results, summary), iso_dated_block(results, summary, today, results[0].created_at),
                  injection_block(results, summary, today=today, summary_written=results[0].created_at, order="rank"),
                  injection_block(results, summary, today=today, summary_written=results[0].created_at))
        rows.append(([tokens(b) for b in blocks], [len(b) / 4 for b in blocks]))
        days.append(len({r.created_at[:10] for r in results}))
        resolved.append(sum(1 for r in results if r.told))

    names = ("undated (before 29)", "ISO, ranked (main)", "words, ranked", "words, by day (now)")
    print(f"{len(rows)} blocks of {args.k} LoCoMo results plus a session summary (categories 1-4); "
          f"days per block {statistics.mean(days):.2f}, lines with a resolved time {statistics.mean(resolved):.2f}")
    print(f"{'':24}" + "".join(f"{n:>22}" for n in names))
    for measure, which in (("MiniLM tokens", 0), ("characters / 4", 1)):
        means = [statistics.mean(r[which][i] for r in rows) for i in range(len(names))]
        print(f"{measure:24}" + "".join(f"{m:22.1f}" for m in means))
        print(f"{'  vs main':24}" + "".join(f"{m - means[1]:+22.1f}" for m in means))


if __name__ == "__main__":
    main()
