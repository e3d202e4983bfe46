"""NER features: words (or characters) with one tag each -> tokens with aligned labels.

Alignment, the same for every tokenizer: the words are fed with `is_split_into_words=True`,
so every token belongs to exactly one word (`word_ids`); a sentence whose words are all single
characters is also fed with `unspaced_words=True` (running text cut into characters: a
SentencePiece tokenizer puts no word-start mark before each, nlp/tokenizer/unigram.py), a
word-segmented one without (each word marked, as transformers does with pre-split words). The
first token of a word gets the word's tag id, later tokens of the word get -100 (or, with
`label_all_tokens=True`, the word's tag with B- turned into I-), special tokens -100.

Why this choice for the jieba+BPE hybrid tokenizer on character-labelled corpora (MSRA, People's
Daily, Weibo): fed raw text, the hybrid merges characters into multi-character tokens whose
span can cross an entity boundary (`在北京` as one token), and any rule "label a token by its
first character" would then change the gold entities before training and the predicted ones
after. Fed the characters as words, the hybrid cannot merge across characters, every character
has its own token, and entity F1 is computed on exactly the annotated spans; the cost is that
the hybrid's word vocabulary is unused for such corpora. For word-segmented corpora the words
are fed as they are and the hybrid keeps its multi-character tokens. `word_tags_from_tokens`
inverts the alignment, which the tests use to prove gold entities survive unchanged.

Sentences longer than `max_length` tokens are split, not truncated (`long_sentences="split"`):
cut into consecutive pieces that each fit, at the last word boundary of a piece that follows a
punctuation mark (，；：、。,;: ...) and lies outside every entity, else at the last boundary
outside every entity, else (an entity longer than a whole piece) at the end of the piece,
which is counted and logged. Every word is then trained on and scored, so the entity F1 of a
split set counts exactly the gold entities of the sentences (a truncated set would skip the
entities of the cut-off tails). `long_sentences="truncate"` keeps the head of each sentence only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nlp._common import DataError, did_you_mean
from nlp.tokenizer import Tokenizer

__all__ = ["align_labels", "preprocess_ner", "visible_characters", "word_tags_from_tokens"]

logger = logging.getLogger(__name__)

_WHITE_SPACE = re.compile(r"\s")  # re's \s is str.isspace() (both Py_UNICODE_ISSPACE)


def visible_characters(text: str) -> tuple[list[int], list[str]]:
    """What a character-level pipeline (NER, lexical analysis) feeds the model of a raw text:
    the offsets and the characters that are not white space, each one a word of its own."""
    if not _WHITE_SPACE.search(text):  # most texts: every character, without a Python loop
        return list(range(len(text))), list(text)
    offsets = [i for i, c in enumerate(text) if not c.isspace()]
    return offsets, [text[i] for i in offsets]


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


_PUNCTUATION = set("，；：、。！？,;:!?）)」』】》…")
_LONG_SENTENCES = ("split", "truncate")


def _tag_prefixes(tags: Sequence[Any], index: Mapping[int, str] | None) -> list[str] | None:
    """Each word's tag prefix ("B", "I", "E", "S", "O"), or None when the tags are ids with no names."""
    names = [t if isinstance(t, str) else (index or {}).get(int(t)) for t in tags]
    if any(n is None for n in names):
        return None
    return [n[:1] for n in names]


def split_points(words: Sequence[str], token_counts: Sequence[int], room: int,
                 prefixes: Sequence[str] | None = None) -> tuple[list[int], int]:
    """Where to cut a sentence so that every piece holds at most `room` tokens.

    Returns (start index of every piece after the first, number of cuts that had to fall inside
    an entity). A cut before word i is "outside every entity" when word i does not continue one
    (its tag prefix is not I- or E-; any cut is when the tags are unknown); among those, the last
    one that follows a punctuation mark wins, else the last one."""
    cuts, forced, start, n = [], 0, 0, len(words)
    while True:
        used, end = 0, start
        while end < n and used + token_counts[end] <= room:
            used += token_counts[end]
            end += 1
        if end >= n:
            return cuts, forced
        if end == start:  # a single word longer than the room: it gets a piece of its own
            end = start + 1
        candidates = [i for i in range(start + 1, end + 1)
                      if prefixes is None or prefixes[i] not in ("I", "E")]
        after_punct = [i for i in candidates if words[i - 1][-1:] in _PUNCTUATION]
        if after_punct:
            cut = after_punct[-1]
        elif candidates:
            cut = candidates[-1]
        else:
            cut, forced = end, forced + 1
        cuts.append(cut)
        start = cut


def _tokenize_words(tokenizer: Tokenizer, words: list[list[str]], **options: Any) -> dict[str, list]:
    """The rows of pre-split sentences: input_ids (token_type_ids, attention_mask) and word_ids,
    sentences of single characters tokenized as unspaced text, the others as pre-split words."""
    unspaced = [all(len(w) == 1 for w in ws) for ws in words]
    out: dict[str, list] = {}
    for flag in (True, False):
        rows = [i for i, u in enumerate(unspaced) if u is flag]
        if not rows:
            continue
        enc = tokenizer([words[i] for i in rows], is_split_into_words=True, unspaced_words=flag, **options)
        columns = {k: enc[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc}
        columns["word_ids"] = [enc.word_ids(j) for j in range(len(rows))]
        for k, values in columns.items():
            column = out.setdefault(k, [None] * len(words))
            for i, v in zip(rows, values):
                column[i] = v
    return out


def _split_long(words: list[list[str]], tags: list[Sequence[Any]] | None, tokenizer: Tokenizer, max_length: int,
                label_names: Sequence[str] | None
                ) -> tuple[list[list[str]], list[Sequence[Any]] | None, list[int], int, int]:
    """Pieces of the sentences, each fitting in `max_length` tokens (see `split_points`): the
    pieces' words, their tags, the sentence each comes from, sentences split, forced cuts."""
    room = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if room < 1:
        raise DataError(f"max_length={max_length} leaves no room for tokens after the special tokens")
    enc = _tokenize_words(tokenizer, words, truncation=False)
    index = dict(enumerate(label_names)) if label_names else None
    out_words, out_tags, origin, n_split, forced = [], [] if tags is not None else None, [], 0, 0
    for i, ws in enumerate(words):
        counts = [0] * len(ws)
        for w in enc["word_ids"][i]:
            if w is not None:
                counts[w] += 1
        if sum(counts) <= room:
            cuts = []
        else:
            prefixes = _tag_prefixes(tags[i], index) if tags is not None else None
            cuts, f = split_points(ws, counts, room, prefixes)
            n_split, forced = n_split + 1, forced + f
        bounds = [0, *cuts, len(ws)]
        for a, b in zip(bounds, bounds[1:]):
            out_words.append(ws[a:b])
            origin.append(i)
            if out_tags is not None:
                out_tags.append(list(tags[i])[a:b])
    return out_words, out_tags, origin, n_split, forced


def preprocess_ner(
    examples: Mapping[str, Sequence[Any]],
    tokenizer: Tokenizer,
    *,
    max_length: int = 256,
    tokens_column: str = "tokens",
    tags_column: str = "ner_tags",
    label_names: Sequence[str] | None = None,
    label_all_tokens: bool = False,
    long_sentences: str = "split",
) -> dict[str, list]:
    """Tokenize a batch of pre-split sentences and align their tags (`labels`).

    Tags may be ids or names (names need `label_names`, e.g. `config.id2label` in order, or
    `ds.features["ner_tags"].feature.names`). Sentences longer than `max_length` tokens are split
    into pieces (`long_sentences="split"`, one feature row each, see the module docstring; the
    output then has more rows than the input, and `sentence_index` names each row's sentence) or
    truncated (`"truncate"`: the words cut off are counted and logged at WARNING).
    """
    if tokens_column not in examples:
        raise DataError(f"no {tokens_column!r} column; columns are {sorted(examples)}."
                        f"{did_you_mean(tokens_column, examples)}")
    if long_sentences not in _LONG_SENTENCES:
        raise DataError(f"long_sentences={long_sentences!r}; valid: {', '.join(_LONG_SENTENCES)}")
    words = [list(ws) for ws in examples[tokens_column]]
    for i, ws in enumerate(words):
        if not ws:
            raise DataError(f"row {i} of the batch has no tokens")
    all_tags = list(examples[tags_column]) if tags_column in examples else None
    for i, tags in enumerate(all_tags or []):
        if len(tags) != len(words[i]):
            raise DataError(f"row {i}: {len(words[i])} tokens but {len(tags)} tags; each token needs one tag")
    sentence_index = list(range(len(words)))
    if long_sentences == "split":
        pieces, piece_tags, sentence_index, n_split, forced = _split_long(words, all_tags, tokenizer, max_length,
                                                                          label_names)
        if n_split:
            logger.info("split %d sentences longer than max_length=%d tokens into %d pieces", n_split,
                        max_length, len(pieces) - len(words) + n_split)
            if forced:
                logger.warning("%d cuts fell inside an entity longer than max_length=%d tokens; raise "
                               "max_length to keep such entities whole", forced, max_length)
        words, all_tags = pieces, piece_tags
    out = _tokenize_words(tokenizer, words, truncation=True, max_length=max_length)
    out["sentence_index"] = sentence_index
    cut = sum(len(ws) - (1 + max((w for w in out["word_ids"][i] if w is not None), default=-1))
              for i, ws in enumerate(words))
    if cut:
        logger.warning("truncation to max_length=%d cut %d words off the ends of sentences in this "
                       "batch; raise max_length to keep them", max_length, cut)
    if all_tags is not None:
        index = {t: i for i, t in enumerate(label_names)} if label_names else None
        b_to_i = _b_to_i(label_names)
        labels = []
        for i, tags in enumerate(all_tags):
            ids = []
            for t in tags:
                if isinstance(t, str):
                    if index is None:
                        raise DataError(f"row {sentence_index[i]}: tag {t!r} is a name but no label_names were given")
                    if t not in index:
                        raise DataError(f"row {sentence_index[i]}: tag {t!r} is not in the tag set {list(index)}."
                                        f"{did_you_mean(t, index)}")
                    ids.append(index[t])
                else:
                    ids.append(int(t))
            labels.append(align_labels(out["word_ids"][i], ids, label_all_tokens=label_all_tokens,
                                       b_to_i=b_to_i))
        out["labels"] = labels
    return out
