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
"""

from __future__ import annotations

import functools
import sys
import unicodedata

__all__ = ["fold_table"]


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
