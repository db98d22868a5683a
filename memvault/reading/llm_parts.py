"""Questions in parts by the LLM (setting llm_query_parts, off by default; issue 45; docs/design.md,
"The read path", step 2): one call per search asks the model for the separate questions a question
asks; they take the place of parts.py's rules. A small model's mistake costs little: the question
itself is still searched and ranked, the parts only bring candidates and lift each part's best
answers beside it. An answer of one question (or none) means no parts; an LLM that cannot be
reached is said once on stderr, and the rules decide.
"""

from __future__ import annotations

import pydantic

from memvault.reading.parts import MAX_PARTS

SYSTEM = ("You split a question a person asks their memory into the separate questions it asks, each one "
          "standing alone (repeat the names and words it needs). A question that asks one thing is not split: "
          "reply with an empty list.")
EXAMPLE = ('Question: Which city did both my sister and my best friend move to?\n'
           '{"questions": ["Which city did my sister move to?", "Which city did my best friend move to?"]}\n'
           'Question: Where does Lena live?\n{"questions": []}')
MAX_CHARS = 400


class Parts(pydantic.BaseModel):
    questions: list[str]


def prompt(question: str) -> list[dict]:
    return [{"role": "system", "content": f"{SYSTEM}\n\n{EXAMPLE}"},
            {"role": "user", "content": f"Question: {' '.join(question.split())[:MAX_CHARS]}"}]


def ask(cfg, question: str) -> tuple[str, ...] | None:
    """The model's parts of `question` (() when it asks one thing); None when the answer stays
    unreadable. Raises llm.LLMError when the model cannot be asked."""
    from memvault.store import llm

    answer = llm.structured(cfg, prompt(question), Parts)
    if answer is None:
        return None
    found = [" ".join(q.split()) for q in answer.questions if q and q.strip()]
    found = [q for q in dict.fromkeys(found) if q.lower() != " ".join(question.split()).lower()]
    return tuple(found[:MAX_PARTS + 1]) if len(found) >= 2 else ()


class LLMParts:
    """The LLM's parts of a question (setting llm_query_parts); None, said once on stderr, when the
    LLM cannot be reached or answers nothing readable (the rules decide then)."""

    def __init__(self, settings, say):
        self.settings, self.say, self.failed = settings, say, False

    def __call__(self, question: str) -> tuple[str, ...] | None:
        from memvault.store.llm import LLMConfig, LLMError

        try:
            return ask(LLMConfig.from_settings(self.settings), question)
        except LLMError as exc:
            if not self.failed:
                self.say(f"memvault: llm_query_parts: {exc}; the question's parts by the rules")
                self.failed = True
            return None
