"""The hybrid tokenizer's normalisation: a one-character-to-one-character table.

Because every character maps to exactly one character, an offset in the folded text is the
same offset in the original text: no alignment bookkeeping, and no way to get it wrong.

- full-width ASCII (U+FF01..U+FF5E) -> ASCII, ideographic space U+3000 -> space;
- lower-casing, only where `str.lower()` gives one character (so not 'İ');
- control and format characters (Unicode Cc/Cf, U+FFFD), like BERT's `clean_text`, and every
  whitespace character -> a plain space, which the segmenter returns as its own word and the
  tokenizer then drops (they make no token, as in BERT).

Not done, since it would change lengths: NFKC compatibility forms (①, ﬁ), accent stripping,
traditional -> simplified conversion.

`fold_table` is the table for `str.translate` (one text at a time, ~50 ns a character);
`fold_batch` applies the same table to a whole batch as one numpy lookup over UTF-32 code
points (~1 ns a character), which is what the hybrid tokenizer's batch path uses.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import Sequence

import numpy as np

__all__ = ["fold_table", "fold_batch"]


@functools.lru_cache(maxsize=4)
def fold_table(lower: bool = True, width: bool = True) -> dict[int, int]:
    table: dict[int, int] = {}
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if c.isspace() or unicodedata.category(c) in ("Cc", "Cf") or cp == 0xFFFD:
            if c != " ":
                table[cp] = 0x20
            continue
        if width and 0xFF01 <= cp <= 0xFF5E:
            c = chr(cp - 0xFEE0)
        if lower:
            low = c.lower()
            if len(low) == 1:
                c = low
        if ord(c) != cp:
            table[cp] = ord(c)
    return table


@functools.lru_cache(maxsize=4)
def _fold_array(lower: bool, width: bool, space: int) -> np.ndarray:
    """`fold_table` as a lookup array over every code point; whitespace and controls -> `space`."""
    table = np.arange(sys.maxunicode + 1, dtype=np.uint32)  # 4.4 MB
    for cp, to in fold_table(lower, width).items():
        table[cp] = space if to == 0x20 else to
    table[0x20] = space
    table.flags.writeable = False
    return table


def fold_batch(texts: Sequence[str], lower: bool = True, width: bool = True, space: str = " ") -> list[str]:
    """`[t.translate(fold_table(lower, width)) for t in texts]`, with `space` in place of " ".

    `space` lets a caller mark the folded whitespace with a character of its choice (the hybrid
    tokenizer uses NUL, which the segmenter cuts as a word of its own and which it then drops).
    Raises UnicodeEncodeError on a lone surrogate, as `str.encode` does.
    """
    if len(space) != 1 or space == "\n":
        raise ValueError(f"space must be one character other than a newline, got {space!r}")
    if not texts:
        return []
    # One "\n"-joined string, so that encoding, lookup and decoding are three C calls for the
    # whole batch; "\n" inside a text folds to `space`, so only the joints are put back to "\n".
    joined = "\n".join(texts)
    codes = _fold_array(bool(lower), bool(width), ord(space))[
        np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    ]
    if len(texts) > 1:
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        codes[np.cumsum(lengths[:-1] + 1) - 1] = 0x0A
    return codes.tobytes().decode("utf-32-le").split("\n")
