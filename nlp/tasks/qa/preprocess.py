"""QA features: (question, context) cut into overlapping windows, answers mapped to tokens.

Each example becomes one or more windows ("features"): question first, then as much context as
fits in `max_length` (truncation="only_second"); consecutive windows of one context overlap by
`doc_stride` tokens (the tokenizer's `stride`, transformers' and PaddleNLP's meaning). Per window:

- `start_positions` / `end_positions`: the answer's first and last token when the whole answer
  lies inside the window's context, else 0 and 0 (the [CLS] token). Unanswerable examples
  (`is_impossible`, or no answer) point at [CLS] in every window.
- `example_id`: the example's `id`, to gather all windows of an example in post-processing.
- `offset_mapping`: (start, end) character offsets into the original context for context
  tokens, None for question and special tokens (so post-processing cannot pick them).

The collators drop `example_id` / `offset_mapping` by default; post-processing reads them from
the features dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nlp._common import DataError
from nlp.tokenizer import Tokenizer

__all__ = ["answer_token_span", "preprocess_qa"]


def answer_token_span(offsets: Sequence[Any], sequence_ids: Sequence[int | None],
                      start_char: int, end_char: int) -> tuple[int, int]:
    """Token (start, end) of the character span [start_char, end_char) in one window; (0, 0)
    when the span is not wholly inside the window's context."""
    ctx = [i for i, s in enumerate(sequence_ids) if s == 1]
    if not ctx:
        return 0, 0
    first, last = ctx[0], ctx[-1]
    if offsets[first][0] > start_char or offsets[last][1] < end_char:
        return 0, 0
    ts = first
    while ts <= last and offsets[ts][1] <= start_char:
        ts += 1
    te = last
    while te >= first and offsets[te][0] >= end_char:
        te -= 1
    if ts > te:  # the answer lies inside a gap (whitespace) between tokens
        return 0, 0
    return ts, te


def preprocess_qa(
    examples: Mapping[str, Sequence[Any]],
    tokenizer: Tokenizer,
    *,
    max_length: int = 384,
    doc_stride: int = 128,
) -> dict[str, list]:
    """Windows of a batch of SQuAD-format examples (columns id, question, context[, answers,
    is_impossible]). Labels are added when the batch has an `answers` column."""
    for col in ("id", "question", "context"):
        if col not in examples:
            raise DataError(f"QA examples need a {col!r} column; columns are {sorted(examples)}")
    ids = [str(x) for x in examples["id"]]
    questions = [q.strip() if isinstance(q, str) else q for q in examples["question"]]
    contexts = list(examples["context"])
    for i, (q, c) in enumerate(zip(questions, contexts)):
        if not isinstance(q, str) or not q:
            raise DataError(f"example {ids[i]!r} has an empty question")
        if not isinstance(c, str) or not c.strip():
            raise DataError(f"example {ids[i]!r} has an empty context")
    try:
        enc = tokenizer(questions, contexts, truncation="only_second", max_length=max_length,
                        stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    except Exception as err:  # a question longer than the window leaves no room for context
        raise DataError(f"cannot window this batch with max_length={max_length}, "
                        f"doc_stride={doc_stride}: {err}. Shorten the questions or raise max_length "
                        "(doc_stride must stay below the room left for context)") from err
    n = len(enc["input_ids"])
    sample = enc["overflow_to_sample_mapping"]
    out: dict[str, list] = {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc}
    out["example_id"] = [ids[s] for s in sample]
    offsets_out, starts, ends = [], [], []
    answers = examples.get("answers")
    impossible = examples.get("is_impossible")
    for r in range(n):
        seq = enc.sequence_ids(r)
        offsets = enc["offset_mapping"][r]
        offsets_out.append([list(o) if s == 1 else None for o, s in zip(offsets, seq)])
        if answers is None:
            continue
        s = sample[r]
        ans = answers[s]
        texts, begins = list(ans["text"]), list(ans["answer_start"])
        if (impossible is not None and impossible[s]) or not texts:
            starts.append(0)
            ends.append(0)
            continue
        start_char = int(begins[0])
        if contexts[s][start_char:start_char + len(texts[0])] != texts[0]:
            raise DataError(f"example {ids[s]!r}: answer {texts[0]!r} is not at answer_start="
                            f"{start_char} of its context (found "
                            f"{contexts[s][start_char:start_char + len(texts[0])]!r}); fix the record "
                            "or read the file with read_squad(on_bad_answer='relocate')")
        ts, te = answer_token_span(offsets, seq, start_char, start_char + len(texts[0]))
        starts.append(ts)
        ends.append(te)
    out["offset_mapping"] = offsets_out
    if answers is not None:
        out["start_positions"] = starts
        out["end_positions"] = ends
    return out
