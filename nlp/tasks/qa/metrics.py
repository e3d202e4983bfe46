"""CMRC2018 exact match and F1, computed as the official ``cmrc2018_evaluate.py`` (v5) does.

The official rules, reproduced step by step:

- text is lower-cased and stripped;
- *mixed segmentation*: each CJK character in U+4E00..U+9FA5 and each punctuation mark of
  `PUNCTUATION` is its own segment; runs of other characters (Latin words, digits, spaces,
  other symbols) go through NLTK's Treebank word tokenizer;
- F1 removes `PUNCTUATION` segments, then takes the longest common *contiguous* run of
  segments (not the bag overlap SQuAD uses) as the overlap, and keeps the best score over
  the reference answers;
- EM compares the strings with `PUNCTUATION` removed; scores are percentages over every
  question of the references, a missing prediction scoring 0.

The official script calls ``nltk.word_tokenize``, which first splits sentences with the Punkt
model (a data download). Here runs are split into sentences at ``.!?`` followed by white
space and each sentence goes through the same Treebank tokenizer, so no download is needed;
the two differ only for abbreviations such as "Mr. Smith" inside an English run.

Extension (not in the official script): a question with no reference answer (unanswerable,
SQuAD 2.0 style) scores 1 for EM and F1 when the prediction is empty, else 0.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from nlp._extras import require

__all__ = [
    "PUNCTUATION",
    "mixed_segmentation",
    "remove_punctuation",
    "find_lcs",
    "cmrc_f1",
    "cmrc_em",
    "cmrc2018_metrics",
]

# The official list, in its order. "……" is a two-character entry, so a single "…" never
# matches it (kept as in the script: scores must equal the official ones).
PUNCTUATION = ["-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=",
               "，", "。", "：", "？", "！", "“", "”", "；", "’", "《", "》", "……", "·", "、",
               "「", "」", "（", "）", "－", "～", "『", "』"]  # fmt: skip
_PUNCT = frozenset(PUNCTUATION)
_CJK = re.compile(r"[\u4e00-\u9fa5]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_treebank = None


def _word_tokenize(text: str) -> list[str]:
    global _treebank
    if _treebank is None:
        tokenize = require("nltk.tokenize.destructive", "the CMRC2018 metric's mixed segmentation", extra="qa")
        _treebank = tokenize.NLTKWordTokenizer()
    return [tok for sent in _SENTENCE_END.split(text) if sent for tok in _treebank.tokenize(sent)]


def mixed_segmentation(text: str, rm_punc: bool = False) -> list[str]:
    """Split Chinese characters apart and keep English/digit runs as Treebank words."""
    text = str(text).lower().strip()
    segs: list[str] = []
    run = ""
    for char in text:
        if rm_punc and char in _PUNCT:
            continue
        if _CJK.search(char) or char in _PUNCT:
            if run:
                segs.extend(_word_tokenize(run))
                run = ""
            segs.append(char)
        else:
            run += char
    if run:
        segs.extend(_word_tokenize(run))
    return segs


def remove_punctuation(text: str) -> str:
    """Lower-case, strip, and drop the official punctuation marks."""
    return "".join(c for c in str(text).lower().strip() if c not in _PUNCT)


def find_lcs(s1: Sequence[str], s2: Sequence[str]) -> tuple[Sequence[str], int]:
    """Longest common contiguous run of `s1` and `s2` (the first one found), and its length."""
    prev = [0] * (len(s2) + 1)
    best, end = 0, 0
    for i in range(len(s1)):
        cur = [0] * (len(s2) + 1)
        for j in range(len(s2)):
            if s1[i] == s2[j]:
                cur[j + 1] = prev[j] + 1
                if cur[j + 1] > best:
                    best, end = cur[j + 1], i + 1
        prev = cur
    return s1[end - best : end], best


def cmrc_f1(answers: Iterable[str], prediction: str) -> float:
    """Best F1 (0..1) of `prediction` over the reference `answers`."""
    answers = list(answers)
    if not answers:
        return float(not str(prediction).strip())
    pred_segs = mixed_segmentation(prediction, rm_punc=True)
    scores = []
    for ans in answers:
        ans_segs = mixed_segmentation(ans, rm_punc=True)
        _, lcs_len = find_lcs(ans_segs, pred_segs)
        if lcs_len == 0:
            scores.append(0.0)
            continue
        precision, recall = lcs_len / len(pred_segs), lcs_len / len(ans_segs)
        scores.append(2 * precision * recall / (precision + recall))
    return max(scores)


def cmrc_em(answers: Iterable[str], prediction: str) -> float:
    """1.0 when `prediction` equals a reference with punctuation removed, else 0.0."""
    answers = list(answers)
    if not answers:
        return float(not str(prediction).strip())
    pred = remove_punctuation(prediction)
    return float(any(remove_punctuation(a) == pred for a in answers))


def cmrc2018_metrics(
    predictions: Mapping[str, str],
    references: Mapping[str, Sequence[str]] | Iterable[Mapping],
) -> dict:
    """Official-style scores (percentages) of `predictions` (id -> answer text).

    `references` is id -> list of answer texts, or records with ``id`` and ``answers``
    (a list of texts, or SQuAD-style ``{"text": [...], "answer_start": [...]}``).
    Returns ``{"exact_match", "f1", "average", "total", "skipped"}``; `skipped` counts
    questions without a prediction (scored 0, as the official script does).
    """
    if isinstance(references, Mapping):
        refs = {str(k).strip(): list(v) for k, v in references.items()}
    else:
        refs = {}
        for rec in references:
            answers = rec["answers"]
            refs[str(rec["id"]).strip()] = list(answers["text"] if isinstance(answers, Mapping) else answers)
    f1 = em = 0.0
    skipped = 0
    for qid, answers in refs.items():
        if qid not in predictions:
            skipped += 1
            continue
        prediction = str(predictions[qid])
        f1 += cmrc_f1(answers, prediction)
        em += cmrc_em(answers, prediction)
    total = len(refs)
    f1_score = 100.0 * f1 / total if total else 0.0
    em_score = 100.0 * em / total if total else 0.0
    return {"exact_match": em_score, "f1": f1_score, "average": (em_score + f1_score) / 2,
            "total": total, "skipped": skipped}
