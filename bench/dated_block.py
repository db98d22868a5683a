"""What dating the injection block costs (issue 29, "Dates in what the model reads").

Builds the block a chat would send for LoCoMo questions (categories 1-4): each question's evidence
turns, then the turns that follow them, up to k results, with the conversation's rolling summary
stand-in (its first session summary). Counts it twice: as memvault wrote it before issue 29 (no
dates) and as it writes it now (`Today is ...`, `[YYYY-MM-DD]` per line, the summary's date), with
the MiniLM WordPiece tokenizer the package bundles and by characters / 4. No index, no model: the
block's text only, so the numbers are the same on any machine.

    python bench/dated_block.py [--k 5] [--questions 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import memvault
from memvault.reading import retrieval
from memvault.reading.retrieval import INJECTION_HEADER, Result, injection_block
from memvault.store import files

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

    rows = []  # (undated tokens, dated tokens, undated chars, dated chars)
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
            results.append(Result(memory_id, "", "user", conv, row["created_at"], row["content"], {}))
        summary = summaries.get(q["conv_id"])
        before = undated_block(results, summary)
        after = injection_block(results, summary, today=files.parse_time(q["query_now"]),
                                summary_written=results[0].created_at)
        rows.append((tokens(before), tokens(after), len(before), len(after)))

    mean = lambda i: statistics.mean(r[i] for r in rows)  # noqa: E731
    print(f"{len(rows)} blocks of {args.k} LoCoMo results plus a session summary (categories 1-4)")
    print(f"{'':24}{'undated':>10}{'dated':>10}{'added':>10}{'added %':>9}")
    for name, a, b in (("MiniLM tokens", 0, 1), ("characters / 4", 2, 3)):
        undated, dated = mean(a), mean(b)
        if a == 2:
            undated, dated = undated / 4, dated / 4
        print(f"{name:24}{undated:10.1f}{dated:10.1f}{dated - undated:10.1f}{100 * (dated - undated) / undated:8.1f}%")
    # A result line's date alone, and the lines every block gets once (today, the summary's date).
    line = tokens("[2023-05-08] [user] x") - tokens("[user] x")
    print(f"per result line: {line} MiniLM tokens for its date; once per block: ~{mean(1) - mean(0) - line * args.k:.0f}")


if __name__ == "__main__":
    main()
