"""An optional reranker for those with a local LLM and no cross-encoder (setting llm_rerank, off
by default; docs/design.md, "The read path"). One call per search: the model reads the question
and the first DEPTH results and names the memories that help answer it, most helpful first;
those go first, the others keep their order after them (a small model's "none helps" is not
trusted to hide a memory). Its cost and effect: `bench/locomo.py --configs llm-rerank` (bench/README.md,
"Retrieval quality, issue 15").
"""

from __future__ import annotations

import pydantic

DEPTH = 10  # how many results the model reads
MAX_CHARS = 300  # of each memory's text

SYSTEM = ("You judge which of a person's memories help answer their question. Reply with the numbers of the "
          "memories that help, most helpful first; an empty list when none does.")


class Helpful(pydantic.BaseModel):
    numbers: list[int]


def prompt(question: str, texts: list[str]) -> list[dict]:
    listing = "\n".join(f"[{i}] {' '.join(t.split())[:MAX_CHARS]}" for i, t in enumerate(texts, 1))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {question}\n\nMemories:\n{listing}\n\n"
                                        "Which memories help answer the question?"}]


def rerank(cfg, question: str, results: list) -> list:
    """The results in the model's order (helpful first). Raises llm.LLMError when it cannot be
    asked; an answer that stays unreadable leaves the order as it was."""
    from memvault.store import llm

    head = results[:DEPTH]
    answer = llm.structured(cfg, prompt(question, [r.text for r in head]), Helpful)
    if answer is None:
        return results
    order = list(dict.fromkeys(n - 1 for n in answer.numbers if 1 <= n <= len(head)))
    for rank, index in enumerate(order, 1):
        head[index].scores["llm_rank"] = rank
    return [head[i] for i in order] + [r for i, r in enumerate(head) if i not in order] + results[DEPTH:]


class LLMOrder:
    """The results in the LLM's order (setting llm_rerank); in their own order, said once on stderr,
    when the LLM cannot be reached."""

    def __init__(self, settings, say):
        self.settings, self.say, self.failed = settings, say, False

    def __call__(self, question: str, results: list) -> list:
        from memvault.store.llm import LLMConfig, LLMError

        if not results:
            return results
        try:
            return rerank(LLMConfig.from_settings(self.settings), question, results)
        except LLMError as exc:
            if not self.failed:
                self.say(f"memvault: llm_rerank: {exc}; results in their own order")
                self.failed = True
            return results
