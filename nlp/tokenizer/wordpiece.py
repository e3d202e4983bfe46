"""ERNIE/BERT WordPiece tokenizer on the `tokenizers` library.

Built from the same pieces transformers' BertTokenizerFast uses (BertNormalizer,
BertPreTokenizer, WordPiece model, TemplateProcessing, WordPiece decoder), so ids, offsets and
alignment are identical to it on the same vocabulary; tests/tokenizer/test_wordpiece_parity.py
checks that on the review and People's Daily corpora.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers

from nlp._common import ConfigError
from nlp.tokenizer._files import check_dir, read_json, read_vocab
from nlp.tokenizer.base import SPECIAL_TOKEN_NAMES, VERY_LARGE_INTEGER, Tokenizer

__all__ = ["WIDE_ASCII", "WordPieceTokenizer"]

# Printable ASCII -> its full-width form (U+FF01..U+FF5E), one character for one, so offsets hold:
# what `widen_ascii` feeds a model trained on text that writes digits, Latin letters and
# punctuation full-width (People's Daily 1998: "１９９８年", "３．５％"), where the ASCII forms of
# today's text ("2024年", "3.5%") are characters it never read.
WIDE_ASCII = {o: o + 0xFEE0 for o in range(0x21, 0x7F)}


class WordPieceTokenizer(Tokenizer):
    """ERNIE/BERT WordPiece: CJK characters one per token, `##` continuation pieces."""

    tokenizer_class = "BertTokenizer"

    def __init__(
        self,
        vocab: dict[str, int] | None = None,
        *,
        backend: tokenizers.Tokenizer | None = None,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        widen_ascii: bool = False,
        model_max_length: int | None = None,
        **special_tokens: Any,
    ) -> None:
        if (vocab is None) == (backend is None):
            raise ConfigError("give exactly one of vocab (token -> id) or backend (a tokenizers.Tokenizer)")
        if not isinstance(widen_ascii, bool):
            raise ConfigError(f"widen_ascii must be true or false, got {widen_ascii!r}")
        self.do_lower_case = do_lower_case
        self.strip_accents = strip_accents
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.widen_ascii = widen_ascii
        if backend is None:
            if not vocab:
                raise ConfigError("the WordPiece vocabulary is empty")
            unk = special_tokens.get("unk_token") or "[UNK]"
            unk = unk["content"] if isinstance(unk, dict) else unk
            if unk not in vocab:
                raise ConfigError(
                    f"unk_token {unk!r} is not in the vocabulary; every WordPiece vocab needs it"
                )
            backend = tokenizers.Tokenizer(
                models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100)
            )
            backend.normalizer = normalizers.BertNormalizer(
                clean_text=True,
                handle_chinese_chars=tokenize_chinese_chars,
                strip_accents=strip_accents,
                lowercase=do_lower_case,
            )
            backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            backend.decoder = decoders.WordPiece(prefix="##")
        super().__init__(backend, model_max_length=model_max_length, **special_tokens)

    @property
    def input_fold(self) -> dict[int, int] | None:
        """The `str.translate` table applied to every text before it is tokenized (None: none)."""
        return WIDE_ASCII if self.widen_ascii else None

    def _encode(self, firsts, seconds, is_split_into_words, add_special_tokens, unspaced_words=False):
        # no word-start marks: unspaced words tokenize as any pre-split words do
        if self.widen_ascii:  # one character for one: the encodings' offsets are the text's
            firsts = _translated(firsts, is_split_into_words)
            seconds = None if seconds is None else _translated(seconds, is_split_into_words)
        inputs = firsts if seconds is None else list(zip(firsts, seconds))
        encodings = self._backend.encode_batch(
            inputs, is_pretokenized=is_split_into_words, add_special_tokens=add_special_tokens
        )
        return encodings, None

    # ---- files -------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, directory: str | Path, **overrides: Any) -> "WordPieceTokenizer":
        """Load from a directory with tokenizer.json, or vocab.txt (+ optional JSON configs).

        `overrides` replace tokenizer_config.json entries (e.g. `model_max_length=512`).
        """
        path = check_dir(directory)
        config = read_json(path / "tokenizer_config.json")
        config.update({k: v for k, v in read_json(path / "special_tokens_map.json").items()
                       if k in SPECIAL_TOKEN_NAMES})
        config.update(overrides)
        kwargs: dict[str, Any] = {n: config[n] for n in SPECIAL_TOKEN_NAMES if config.get(n)}
        max_len = config.get("model_max_length")
        if max_len is not None and (not isinstance(max_len, (int, float)) or max_len <= 0):
            raise ConfigError(f"model_max_length in {path} must be a positive integer, got {max_len!r}")
        kwargs["model_max_length"] = int(max_len) if max_len and max_len < VERY_LARGE_INTEGER else None
        widen = config.get("widen_ascii", False)
        if not isinstance(widen, bool):
            raise ConfigError(f"widen_ascii in {path / 'tokenizer_config.json'} must be true or false, got {widen!r}")
        kwargs["widen_ascii"] = widen
        if (path / "tokenizer.json").is_file():
            try:
                backend = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
            except Exception as err:
                raise ConfigError(f"{path / 'tokenizer.json'} could not be read: {err}") from None
            norm = json.loads(backend.to_str()).get("normalizer") or {}
            if norm.get("type") == "BertNormalizer":
                kwargs.update(
                    do_lower_case=norm.get("lowercase", True),
                    strip_accents=norm.get("strip_accents"),
                    tokenize_chinese_chars=norm.get("handle_chinese_chars", True),
                )
            return cls(backend=backend, **kwargs)
        if not (path / "vocab.txt").is_file():
            present = sorted(p.name for p in path.iterdir())[:10]
            raise ConfigError(
                f"{path} holds neither tokenizer.json nor vocab.txt (found: {present}); "
                "a WordPiece tokenizer directory needs one of them"
            )
        for key in ("do_lower_case", "tokenize_chinese_chars"):
            if key in config and not isinstance(config[key], bool):
                raise ConfigError(f"{key} in tokenizer_config.json must be true or false, got {config[key]!r}")
        return cls(
            read_vocab(path / "vocab.txt"),
            do_lower_case=config.get("do_lower_case", True),
            strip_accents=config.get("strip_accents"),
            tokenize_chinese_chars=config.get("tokenize_chinese_chars", True),
            **kwargs,
        )

    def _config_fields(self) -> dict[str, Any]:
        # tokenizer_class "BertTokenizer": transformers' AutoTokenizer loads the saved dir as BertTokenizer(Fast)
        fields = {
            "do_lower_case": self.do_lower_case,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "clean_up_tokenization_spaces": True,
        }
        if self.widen_ascii:  # written only where set: transformers' BertTokenizer ignores the key
            fields["widen_ascii"] = True
        return fields


def _translated(texts: list[Any], split: bool) -> list[Any]:
    if split:
        return [[w.translate(WIDE_ASCII) for w in words] for words in texts]
    return [t.translate(WIDE_ASCII) for t in texts]
