"""NER features: words (or characters) with one tag each -> tokens with aligned labels.

Alignment, the same for both tokenizers: the words are fed with `is_split_into_words=True`,
so every token belongs to exactly one word (`word_ids`). The first token of a word gets the
word's tag id, later tokens of the word get -100 (or, with `label_all_tokens=True`, the word's
tag with B- turned into I-), special tokens -100.

Why this choice for the jieba+BPE hybrid tokenizer on character-labelled corpora (MSRA, People's
Daily, Weibo): fed raw text, the hybrid merges characters into multi-character tokens whose
span can cross an entity boundary (`在北京` as one token), and any rule "label a token by its
first character" would then change the gold entities before training and the predicted ones
after. Fed the characters as words, the hybrid cannot merge across characters, every character
has its own token, and entity F1 is computed on exactly the annotated spans; the cost is that
the hybrid's word vocabulary is unused for such corpora. For word-segmented corpora the words
are fed as they are and the hybrid keeps its multi-character tokens. `word_tags_from_tokens`
inverts the alignment, which the tests use to prove gold entities survive unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from nlp._common import DataError, did_you_mean
from nlp.tokenizer import Tokenizer

__all__ = ["align_labels", "preprocess_ner", "word_tags_from_tokens"]

logger = logging.getLogger(__name__)


def _b_to_i(label_names: Sequence[str] | None) -> dict[int, int]:
    if not label_names:
        return {}
    index = {t: i for i, t in enumerate(label_names)}
    out = {}
    for i, t in enumerate(label_names):
        if t.startswith("B-") and "I-" + t[2:] in index:
            out[i] = index["I-" + t[2:]]
    return out


def align_labels(word_ids: Sequence[int | None], word_labels: Sequence[int], *,
                 label_all_tokens: bool = False, b_to_i: Mapping[int, int] | None = None) -> list[int]:
    """Token labels from word labels: first sub-token labelled, the rest -100 (or all labelled)."""
    out, prev = [], None
    for w in word_ids:
        if w is None:
            out.append(-100)
        elif w != prev:
            out.append(int(word_labels[w]))
        else:
            lab = int(word_labels[w])
            out.append((b_to_i or {}).get(lab, lab) if label_all_tokens else -100)
        prev = w
    return out


def word_tags_from_tokens(word_ids: Sequence[int | None], token_tags: Sequence[Any], n_words: int,
                          default: Any = "O") -> list[Any]:
    """Per-word tags from per-token ones (each word takes its first token's tag).

    Words that got no token (a whitespace token, or one cut off by truncation) get `default`.
    """
    out = [default] * n_words
    seen = set()
    for w, t in zip(word_ids, token_tags):
        if w is not None and w not in seen:
            seen.add(w)
            out[w] = t
    return out


def preprocess_ner(
    examples: Mapping[str, Sequence[Any]],
    tokenizer: Tokenizer,
    *,
    max_length: int = 256,
    tokens_column: str = "tokens",
    tags_column: str = "ner_tags",
    label_names: Sequence[str] | None = None,
    label_all_tokens: bool = False,
) -> dict[str, list]:
    """Tokenize a batch of pre-split sentences and align their tags (`labels`).

    Tags may be ids or names (names need `label_names`, e.g. `config.id2label` in order, or
    `ds.features["ner_tags"].feature.names`). Sentences longer than `max_length` tokens are
    truncated; the words cut off are counted and logged at WARNING, never dropped silently.
    """
    if tokens_column not in examples:
        raise DataError(f"no {tokens_column!r} column; columns are {sorted(examples)}."
                        f"{did_you_mean(tokens_column, examples)}")
    words = [list(ws) for ws in examples[tokens_column]]
    for i, ws in enumerate(words):
        if not ws:
            raise DataError(f"row {i} of the batch has no tokens")
    enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
    out: dict[str, list] = {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc}
    out["word_ids"] = [enc.word_ids(i) for i in range(len(words))]
    cut = sum(len(ws) - (1 + max((w for w in out["word_ids"][i] if w is not None), default=-1))
              for i, ws in enumerate(words))
    if cut:
        logger.warning("truncation to max_length=%d cut %d words off the ends of sentences in this "
                       "batch; raise max_length to keep them", max_length, cut)
    if tags_column in examples:
        index = {t: i for i, t in enumerate(label_names)} if label_names else None
        b_to_i = _b_to_i(label_names)
        labels = []
        for i, (ws, tags) in enumerate(zip(words, examples[tags_column])):
            if len(tags) != len(ws):
                raise DataError(f"row {i}: {len(ws)} tokens but {len(tags)} tags; each token needs one tag")
            ids = []
            for t in tags:
                if isinstance(t, str):
                    if index is None:
                        raise DataError(f"row {i}: tag {t!r} is a name but no label_names were given")
                    if t not in index:
                        raise DataError(f"row {i}: tag {t!r} is not in the tag set {list(index)}."
                                        f"{did_you_mean(t, index)}")
                    ids.append(index[t])
                else:
                    ids.append(int(t))
            labels.append(align_labels(out["word_ids"][i], ids, label_all_tokens=label_all_tokens,
                                       b_to_i=b_to_i))
        out["labels"] = labels
    return out
