"""XLM-RoBERTa's SentencePiece-unigram tokenizer on the `tokenizers` library.

The tokenizer of the XLM-R family and of the BERT models that borrow it (multilingual-e5-small,
paraphrase-multilingual-MiniLM): a tokenizer's family is independent of the encoder's
architecture. Loaded from `tokenizer.json` with the pieces transformers' converter writes for
XLM-R (a `Precompiled` SentencePiece normalizer and a collapse of repeated spaces, a `Metaspace`
pre-tokenizer that marks word starts with U+2581, the unigram model with each piece's
log-probability, `<s> A </s>` and `<s> A </s> </s> B </s>` around the text), so ids and offsets
are transformers' `XLMRobertaTokenizerFast`'s; tests/tokenizer/test_unigram.py checks that.

Offsets are exact characters of the text sent: a piece that covers several characters ("北京")
has the offsets of all of them, and the U+2581 the pre-tokenizer adds before the text is no
character of it, so "▁我" covers only "我".

Character-labelled tasks (NER, lexical analysis, correction) feed one word per character
(`is_split_into_words=True, unspaced_words=True`: nlp/tasks/char_windows.py). Pre-split words
otherwise each get a word-start mark, as transformers' XLM-R tokenizer does (right for English
words): a Chinese character would become "▁" + the character, or a "▁字" piece, a sequence twice
as long as the text and unlike anything the model read in pretraining (running Chinese text has
no spaces, so no marks inside it). Unspaced words get no mark: each character is its own piece
(as "字" mid-text), its label on that piece. The pieces of several characters the unigram model
picks in running text ("北京") still do not occur in those rows, so an entity boundary never
falls inside a piece.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import tokenizers
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers

from nlp._common import ConfigError
from nlp.tokenizer._charsmap import precompiled_charsmap
from nlp.tokenizer._files import check_dir, read_json
from nlp.tokenizer.base import SPECIAL_TOKEN_NAMES, VERY_LARGE_INTEGER, Tokenizer

__all__ = ["UnigramTokenizer", "XLMR_SPECIAL_TOKENS", "build_unigram_backend"]

# XLM-R's special tokens and their ids in every checkpoint of the family (fairseq's dictionary
# order: <s> 0, <pad> 1, </s> 2, <unk> 3; <mask> is the last id)
XLMR_SPECIAL_TOKENS = {
    "cls_token": "<s>", "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>",
    "mask_token": "<mask>",
}
WORD_START = "\u2581"  # SentencePiece's metaspace: marks a piece that starts a word


def build_unigram_backend(pieces: Sequence[tuple[str, float]], unk_id: int,
                          normalization: dict[str, str] | None = None) -> tokenizers.Tokenizer:
    """An XLM-R style `tokenizers.Tokenizer` from (piece, log-probability) pairs in id order,
    the id of the unknown piece, and the normaliser as a table (a string -> its replacement;
    None: no table, only the collapse of repeated spaces)."""
    if not pieces:
        raise ConfigError("the unigram vocabulary is empty; it needs at least the special pieces")
    if not 0 <= unk_id < len(pieces):
        raise ConfigError(f"unk_id={unk_id} is outside the {len(pieces)} pieces")
    seen: dict[str, int] = {}
    for i, (piece, _score) in enumerate(pieces):
        if piece in seen:
            raise ConfigError(f"piece {piece!r} appears twice (ids {seen[piece]} and {i}); "
                              "a unigram vocabulary lists each piece once")
        seen[piece] = i
    backend = tokenizers.Tokenizer(models.Unigram([(p, float(s)) for p, s in pieces], unk_id, False))
    steps = [normalizers.Replace(Regex(" {2,}"), " ")]
    if normalization:
        table = {"type": "Precompiled", "precompiled_charsmap": precompiled_charsmap(normalization)}
        steps.insert(0, _precompiled(table))
    backend.normalizer = normalizers.Sequence(steps)
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement=WORD_START, prepend_scheme="always")
    return backend


def _precompiled(table: dict[str, Any]):
    """A Precompiled normalizer from its JSON (tokenizers exposes no constructor that takes the
    base64 form): read back through a throwaway tokenizer.json."""
    shell = json.loads(tokenizers.Tokenizer(models.Unigram([("<unk>", 0.0)], 0, False)).to_str())
    shell["normalizer"] = table
    return tokenizers.Tokenizer.from_str(json.dumps(shell)).normalizer


class UnigramTokenizer(Tokenizer):
    """XLM-R's SentencePiece unigram: `<s>`, `</s>`, `<pad>`, `<unk>`, `<mask>`; pairs as
    `<s> A </s> </s> B </s>` with every token type 0."""

    tokenizer_class = "XLMRobertaTokenizer"
    model_input_names = ("input_ids", "attention_mask")

    def __init__(self, backend: tokenizers.Tokenizer, *, model_max_length: int | None = None,
                 **special_tokens: Any) -> None:
        if not isinstance(backend.model, models.Unigram):
            raise ConfigError(f"a UnigramTokenizer needs a unigram model, got {type(backend.model).__name__}")
        specials = {**XLMR_SPECIAL_TOKENS, **{k: v for k, v in special_tokens.items() if v}}
        super().__init__(backend, model_max_length=model_max_length, **specials)
        self._unmarked: tokenizers.Tokenizer | None = None  # _unmarked_backend's copy, made at first use

    @property
    def contentless_ids(self) -> frozenset[int]:
        """The bare word-start mark: what white space alone (" ", "\\t", U+3000) tokenizes to."""
        mark = self._backend.token_to_id(WORD_START)
        return frozenset() if mark is None else frozenset((mark,))

    def _configure_post_processor(self) -> None:
        cls, sep = self.cls_token, self.sep_token
        self._backend.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 {sep}:0 $B:0 {sep}:0",
            special_tokens=[(cls, self.cls_token_id), (sep, self.sep_token_id)],
        )

    def _encode(self, firsts, seconds, is_split_into_words, add_special_tokens, unspaced_words=False):
        inputs = firsts if seconds is None else list(zip(firsts, seconds))
        backend = self._unmarked_backend() if unspaced_words else self._backend
        encodings = backend.encode_batch(
            inputs, is_pretokenized=is_split_into_words, add_special_tokens=add_special_tokens
        )
        return encodings, None

    def _unmarked_backend(self) -> tokenizers.Tokenizer:
        """The backend with a pre-tokenizer that adds no word-start mark (for unspaced words),
        with the main backend's current truncation and padding. A copy, not a swap of the
        shared backend's pre-tokenizer, so a concurrent call never sees the other's."""
        if self._unmarked is None:
            copy = tokenizers.Tokenizer.from_str(self._backend.to_str())
            copy.pre_tokenizer = pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="never")
            self._unmarked = copy
        copy, main = self._unmarked, self._backend
        if main.truncation is None:
            copy.no_truncation()
        else:
            copy.enable_truncation(**main.truncation)
        if main.padding is None:
            copy.no_padding()
        else:
            copy.enable_padding(**main.padding)
        return copy

    def pieces(self) -> list[tuple[str, float]]:
        """The unigram model's (piece, log-probability) pairs in id order."""
        return [(p, float(s)) for p, s in json.loads(self._backend.to_str())["model"]["vocab"]]

    # ---- files -------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, directory: str | Path, **overrides: Any) -> "UnigramTokenizer":
        """Load from a directory holding tokenizer.json (the form transformers and the hub ship;
        a sentencepiece.bpe.model alone is not read)."""
        path = check_dir(directory)
        config = read_json(path / "tokenizer_config.json")
        config.update({k: v for k, v in read_json(path / "special_tokens_map.json").items()
                       if k in SPECIAL_TOKEN_NAMES})
        config.update(overrides)
        file = path / "tokenizer.json"
        if not file.is_file():
            present = sorted(p.name for p in path.iterdir())[:10]
            raise ConfigError(
                f"{path} has no tokenizer.json (found: {present}); an XLM-R tokenizer is read from "
                "tokenizer.json: save it with transformers' XLMRobertaTokenizerFast.save_pretrained"
            )
        try:
            backend = tokenizers.Tokenizer.from_file(str(file))
        except Exception as err:
            raise ConfigError(f"{file} could not be read: {err}") from None
        kind = json.loads(backend.to_str())["model"].get("type")
        if kind != "Unigram":
            raise ConfigError(f"{file} holds a {kind} model, not a unigram one; its tokenizer_class "
                              f"{config.get('tokenizer_class')!r} does not match it")
        max_len = config.get("model_max_length")
        if max_len is not None and (not isinstance(max_len, (int, float)) or max_len <= 0):
            raise ConfigError(f"model_max_length in {path} must be a positive integer, got {max_len!r}")
        kwargs: dict[str, Any] = {n: config[n] for n in SPECIAL_TOKEN_NAMES if config.get(n)}
        kwargs["model_max_length"] = int(max_len) if max_len and max_len < VERY_LARGE_INTEGER else None
        return cls(backend, **kwargs)

    def _config_fields(self) -> dict[str, Any]:
        # tokenizer_class "XLMRobertaTokenizer": transformers' AutoTokenizer loads the dir as XLMRobertaTokenizer(Fast)
        return {"bos_token": self.cls_token, "eos_token": self.sep_token,
                "clean_up_tokenization_spaces": False}
