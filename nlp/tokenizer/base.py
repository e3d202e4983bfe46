"""The base tokenizer: everything that happens once a backend can turn words into token ids.

`WordPieceTokenizer` and `HybridTokenizer` both hold a `tokenizers.Tokenizer` (the Rust
library) and differ only in how text reaches it. This module owns the call signature of
transformers' `BertTokenizerFast` (batching rules, truncation, stride/overflow, padding,
tensors) and the `BatchEncoding` result, so both tokenizers behave identically after the
point where text became words.

Truncation and padding are set on the Rust backend for each call, as transformers does, so a
tokenizer object is not safe to call from several threads at once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import tokenizers

from nlp._common import ConfigError, DataError, atomic_write
from nlp.tokenizer._files import write_json, write_vocab
from nlp.tokenizer.gazetteer import Gazetteer

__all__ = ["Tokenizer", "BatchEncoding", "SPECIAL_TOKEN_NAMES"]

logger = logging.getLogger(__name__)

SPECIAL_TOKEN_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_DEFAULT_SPECIALS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}
# transformers' sentinel for "no limit" (int(1e30)); truncation/padding to it is meaningless.
VERY_LARGE_INTEGER = int(1e30)
_TRUNCATION = {True: "longest_first", "longest_first": "longest_first",
               "only_first": "only_first", "only_second": "only_second"}
_PADDING = {True: "longest", "longest": "longest", "max_length": "max_length"}


class BatchEncoding(dict):
    """A dict of model inputs plus per-row alignment (tokens, word ids, sequence ids, offsets).

    Mirrors transformers' BatchEncoding: `enc["input_ids"]`, `enc.word_ids(i)`,
    `enc.sequence_ids(i)`, `enc.tokens(i)`, `enc.char_to_token(...)`.
    """

    def __init__(
        self,
        data: dict[str, Any],
        encodings: list[tokenizers.Encoding] | None = None,
        offsets: Callable[[int], list[tuple[int, int]]] | None = None,
        n_sequences: int = 1,
    ) -> None:
        super().__init__(data)
        self._encodings = encodings or []
        self._offsets = offsets
        self.n_sequences = n_sequences

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def encodings(self) -> list[tokenizers.Encoding]:
        return self._encodings

    def _row(self, i: int) -> tokenizers.Encoding:
        if not self._encodings:
            raise ConfigError("this BatchEncoding carries no alignment information")
        if not -len(self._encodings) <= i < len(self._encodings):
            raise IndexError(f"row {i} out of range for a batch of {len(self._encodings)}")
        return self._encodings[i]

    def tokens(self, i: int = 0) -> list[str]:
        return self._row(i).tokens

    def word_ids(self, i: int = 0) -> list[int | None]:
        return self._row(i).word_ids

    def sequence_ids(self, i: int = 0) -> list[int | None]:
        return self._row(i).sequence_ids

    def offsets(self, i: int = 0) -> list[tuple[int, int]]:
        """Character offsets of row `i` into the ORIGINAL text (0, 0 for special tokens)."""
        self._row(i)
        return self._offsets(i) if self._offsets else self._encodings[i].offsets

    def char_to_token(
        self, batch_or_char_index: int, char_index: int | None = None, sequence_index: int = 0
    ) -> int | None:
        """Index of the token holding character `char_index` of sequence `sequence_index`.

        Called as `char_to_token(char)` for row 0 or `char_to_token(row, char)`, like
        transformers; None when the character produced no token (a space, a dropped control).
        """
        if char_index is None:
            row, char_index = 0, batch_or_char_index
        else:
            row = batch_or_char_index
        seq_ids = self.sequence_ids(row)
        offs = self.offsets(row)
        for t, (sid, (s, e)) in enumerate(zip(seq_ids, offs)):
            if sid == sequence_index and s <= char_index < e:
                return t
        return None

    def token_to_chars(self, batch_or_token_index: int, token_index: int | None = None):
        if token_index is None:
            row, token_index = 0, batch_or_token_index
        else:
            row = batch_or_token_index
        if self.sequence_ids(row)[token_index] is None:
            return None
        return self.offsets(row)[token_index]

    def to(self, device: Any) -> "BatchEncoding":
        """Move tensor values to `device` (as transformers' BatchEncoding.to)."""
        for k, v in self.items():
            if hasattr(v, "to"):
                self[k] = v.to(device)
        return self


def _token_str(value: Any, name: str) -> str:
    """A special token from a config: a string, or transformers' AddedToken dict."""
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    if isinstance(value, str):
        return value
    raise ConfigError(f"{name} must be a string or an AddedToken dict, got {value!r}")


class Tokenizer:
    """Base of the toolkit's tokenizers: transformers' `BertTokenizerFast` call semantics.

    A subclass provides `_encode(firsts, seconds, is_split_into_words, add_special_tokens,
    unspaced_words)` returning the backend's `tokenizers.Encoding`s (truncation and padding already set on
    `self._backend`) and, optionally, a function that maps a row's offsets to the original
    text; plus `from_pretrained` / `save_pretrained`.
    """

    tokenizer_class: ClassVar[str] = "Tokenizer"
    model_input_names = ("input_ids", "token_type_ids", "attention_mask")
    # typed words whose matches become token type ids (nlp/tokenizer/gazetteer.py); None: plain ids
    gazetteer: Gazetteer | None = None

    def __init__(
        self,
        backend: tokenizers.Tokenizer,
        *,
        model_max_length: int | None = None,
        **special_tokens: Any,
    ) -> None:
        self._backend = backend
        self.model_max_length = int(model_max_length) if model_max_length else VERY_LARGE_INTEGER
        unknown = set(special_tokens) - set(SPECIAL_TOKEN_NAMES)
        if unknown:
            raise ConfigError(
                f"unknown special token argument(s) {sorted(unknown)}; valid: {list(SPECIAL_TOKEN_NAMES)}"
            )
        for name in SPECIAL_TOKEN_NAMES:
            value = special_tokens.get(name) or _DEFAULT_SPECIALS[name]
            token = _token_str(value, name)
            if backend.token_to_id(token) is None:
                raise ConfigError(
                    f"{name} {token!r} is not in the vocabulary; add it to vocab.txt or set "
                    f"{name} in tokenizer_config.json to a token the vocabulary has"
                )
            setattr(self, name, token)
        # Special tokens are matched in raw text before anything else, as in transformers.
        backend.add_special_tokens(
            [tokenizers.AddedToken(getattr(self, n), special=True, normalized=False)
             for n in SPECIAL_TOKEN_NAMES]
        )
        self._configure_post_processor()

    # ---- special tokens and vocabulary -------------------------------------------------
    def _configure_post_processor(self) -> None:
        cls, sep = self.cls_token, self.sep_token
        self._backend.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, self.cls_token_id), (sep, self.sep_token_id)],
        )

    @property
    def unk_token_id(self) -> int:
        return self._backend.token_to_id(self.unk_token)

    @property
    def sep_token_id(self) -> int:
        return self._backend.token_to_id(self.sep_token)

    @property
    def pad_token_id(self) -> int:
        return self._backend.token_to_id(self.pad_token)

    @property
    def cls_token_id(self) -> int:
        return self._backend.token_to_id(self.cls_token)

    @property
    def mask_token_id(self) -> int:
        return self._backend.token_to_id(self.mask_token)

    @property
    def all_special_tokens(self) -> list[str]:
        return [getattr(self, n) for n in SPECIAL_TOKEN_NAMES]

    @property
    def all_special_ids(self) -> list[int]:
        return [self._backend.token_to_id(t) for t in self.all_special_tokens]

    @property
    def special_tokens_map(self) -> dict[str, str]:
        return {n: getattr(self, n) for n in SPECIAL_TOKEN_NAMES}

    @property
    def input_fold(self) -> dict[int, int] | None:
        """A `str.translate` table (one character for one) the tokenizer applies to every text
        before the rest, for a caller that matches words against what the model reads; None here."""
        return None

    @property
    def contentless_ids(self) -> frozenset[int]:
        """Ids of tokens that stand for no character of the text (a bare word-start mark, the
        token a SentencePiece tokenizer makes of white space): a text of only these is blank to a
        model. None here."""
        return frozenset()

    @property
    def vocab_size(self) -> int:
        """Size of the base vocabulary (what a model's embedding needs)."""
        return self._backend.get_vocab_size(with_added_tokens=False)

    def __len__(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    def get_vocab(self) -> dict[str, int]:
        return self._backend.get_vocab(with_added_tokens=True)

    @property
    def backend_tokenizer(self) -> tokenizers.Tokenizer:
        """The underlying `tokenizers.Tokenizer` (same name as transformers')."""
        return self._backend

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        """Special tokens added around one sequence ([CLS] x [SEP]: 2) or a pair (3), as transformers'."""
        processor = self._backend.post_processor
        return processor.num_special_tokens_to_add(pair) if processor is not None else 0

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write tokenizer.json, vocab.txt, special_tokens_map.json and tokenizer_config.json
        (with the subclass's `_config_fields()`), each atomically; returns the directory."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        self._backend.no_truncation()
        self._backend.no_padding()
        with atomic_write(path / "tokenizer.json", "w", encoding="utf-8") as f:
            f.write(self._backend.to_str(pretty=True))
        write_vocab(path / "vocab.txt", self._backend.get_vocab(with_added_tokens=False))
        write_json(path / "special_tokens_map.json", self.special_tokens_map)
        config = {"tokenizer_class": self.tokenizer_class, **self._config_fields(), **self.special_tokens_map}
        if self.model_max_length < VERY_LARGE_INTEGER:
            config["model_max_length"] = self.model_max_length
        if self.gazetteer is not None:
            config["gazetteer"] = self.gazetteer.save(path)
        write_json(path / "tokenizer_config.json", config)
        return path

    def _config_fields(self) -> dict[str, Any]:
        """The class's own tokenizer_config.json fields (normalisation, segmentation)."""
        return {}

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        unk = self.unk_token_id
        if isinstance(tokens, str):
            tid = self._backend.token_to_id(tokens)
            return unk if tid is None else tid
        out = []
        for t in tokens:
            tid = self._backend.token_to_id(t)
            out.append(unk if tid is None else tid)
        return out

    def convert_ids_to_tokens(
        self, ids: int | Sequence[int], skip_special_tokens: bool = False
    ) -> str | None | list[str]:
        if isinstance(ids, int):
            return self._backend.id_to_token(ids)
        special = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._backend.id_to_token(int(i)) for i in ids if int(i) not in special]

    def tokenize(self, text: str, text_pair: str | None = None, **kwargs: Any) -> list[str]:
        """Tokens of `text` without special tokens (transformers' `tokenize`)."""
        return self(text, text_pair, add_special_tokens=False, **kwargs).tokens()

    def encode(self, text: Any, text_pair: Any = None, **kwargs: Any) -> list[int]:
        return self(text, text_pair, **kwargs)["input_ids"]

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        ids = _to_id_list(ids)
        if ids and isinstance(ids[0], list):
            raise DataError("decode takes one sequence of ids; use batch_decode for a batch")
        return self._backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def batch_decode(self, batch: Any, skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(row, skip_special_tokens) for row in _to_id_list(batch)]

    # ---- encoding ----------------------------------------------------------------------
    def _encode(
        self,
        firsts: list[Any],
        seconds: list[Any] | None,
        is_split_into_words: bool,
        add_special_tokens: bool,
        unspaced_words: bool = False,
    ) -> tuple[list[tokenizers.Encoding], Callable[[tokenizers.Encoding, int], list] | None]:
        raise NotImplementedError

    @property
    def num_token_types(self) -> int | None:
        """The token type ids a model needs for this tokenizer's single texts when they are more
        than a pair's two (a gazetteer's); None otherwise."""
        return None if self.gazetteer is None else self.gazetteer.num_type_ids

    def char_type_ids(self, text: str) -> list[int] | None:
        """The token type id of each character of a single text, which its tokens take (the
        gazetteer's: nlp/tokenizer/gazetteer.py); None when every token of a single text has 0."""
        return None if self.gazetteer is None else self.gazetteer.type_ids(text)

    def _gazetteer_type_ids(self, rows: list[tokenizers.Encoding], row_sample: list[int], firsts: list[Any],
                            is_split_into_words: bool, map_offsets: Callable | None) -> list[list[int]]:
        """Each token's gazetteer id: that of the character its span starts at, in the text (a
        sample's words joined without spaces, as character-level tasks cut running text); 0 for
        special tokens."""
        assert self.gazetteer is not None
        per_sample: dict[int, tuple[list[int], list[int]]] = {}
        out = []
        for r, enc in enumerate(rows):
            i = row_sample[r]
            if i not in per_sample:
                words = firsts[i] if is_split_into_words else [firsts[i]]
                starts = [0]
                for w in words:
                    starts.append(starts[-1] + len(w))
                per_sample[i] = (self.gazetteer.type_ids("".join(words)), starts)
            ids, starts = per_sample[i]
            offsets = map_offsets(enc, i) if map_offsets is not None else enc.offsets
            row = []
            for w, (a, b) in zip(enc.word_ids, offsets):
                at = None if w is None or b <= a else starts[w if is_split_into_words else 0] + a
                row.append(ids[at] if at is not None and at < len(ids) else 0)
            out.append(row)
        return out

    def _after_encode(self, encodings: list[tokenizers.Encoding], ids: list[list[int]] | None) -> None:
        """Hook for statistics (the hybrid counts [UNK]); `ids`, when given, are each encoding's
        ids, already built for the output."""

    def __call__(
        self,
        text: Any,
        text_pair: Any = None,
        *,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str = False,
        max_length: int | None = None,
        stride: int = 0,
        return_overflowing_tokens: bool = False,
        return_offsets_mapping: bool = False,
        return_special_tokens_mask: bool = False,
        return_token_type_ids: bool = True,
        return_attention_mask: bool = True,
        return_length: bool = False,
        return_tensors: str | None = None,
        pad_to_multiple_of: int | None = None,
        is_split_into_words: bool = False,
        unspaced_words: bool = False,
    ) -> BatchEncoding:
        """transformers' call, plus `unspaced_words`: with `is_split_into_words=True`, the words
        were written with no space between them (Chinese text cut into its characters, as the
        character-labelled tasks feed it), so a tokenizer that marks word starts (SentencePiece's
        "▁") marks none; transformers' rule for pre-split words (a mark on every word, right for
        English words) would put a "▁" before every character, which the model never saw in
        running Chinese text. Tokenizers without word-start marks tokenize the same either way."""
        if unspaced_words and not is_split_into_words:
            raise ConfigError("unspaced_words=True describes pre-split words: pass is_split_into_words=True too")
        batched, firsts, seconds = _batch_inputs(text, text_pair, is_split_into_words)
        self._set_truncation_and_padding(
            padding, truncation, max_length, stride, pad_to_multiple_of, seconds is not None
        )
        try:
            encodings, map_offsets = self._encode(firsts, seconds, is_split_into_words, add_special_tokens,
                                                  unspaced_words)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as err:  # Rust panics surface as pyo3 PanicException(BaseException)
            # checked only on failure, so valid input pays nothing for it
            _raise_on_surrogate(firsts, "text", batched)
            if seconds is not None:
                _raise_on_surrogate(seconds, "text_pair", batched)
            if isinstance(err, (DataError, ConfigError, TypeError)):
                raise
            raise ConfigError(
                f"tokenization failed with truncation={truncation!r}, max_length={max_length!r}, "
                f"stride={stride!r}, padding={padding!r}: {err}"
            ) from err

        rows: list[tokenizers.Encoding] = []
        row_sample: list[int] = []
        for i, enc in enumerate(encodings):
            rows.append(enc)
            row_sample.append(i)
            if return_overflowing_tokens:
                for ov in enc.overflowing:
                    rows.append(ov)
                    row_sample.append(i)

        data: dict[str, Any] = {"input_ids": [e.ids for e in rows]}
        self._after_encode(encodings, None if return_overflowing_tokens else data["input_ids"])
        if return_token_type_ids:
            data["token_type_ids"] = [e.type_ids for e in rows]
            if self.gazetteer is not None:
                if seconds is not None:
                    raise ConfigError("this tokenizer carries a gazetteer, whose word types are its token "
                                      "type ids: it takes single texts, not pairs")
                data["token_type_ids"] = self._gazetteer_type_ids(rows, row_sample, firsts, is_split_into_words,
                                                                  map_offsets)
        if return_attention_mask:
            data["attention_mask"] = [e.attention_mask for e in rows]
        if return_special_tokens_mask:
            data["special_tokens_mask"] = [e.special_tokens_mask for e in rows]

        offsets_fn = None
        if map_offsets is not None:
            cache: dict[int, list] = {}

            def offsets_fn(r: int) -> list:
                if r not in cache:
                    cache[r] = map_offsets(rows[r], row_sample[r])
                return cache[r]

        if return_offsets_mapping:
            data["offset_mapping"] = (
                [offsets_fn(r) for r in range(len(rows))] if offsets_fn else [e.offsets for e in rows]
            )
        if return_length:
            data["length"] = [len(e.ids) for e in rows]
        if return_overflowing_tokens:
            data["overflow_to_sample_mapping"] = row_sample

        if not batched and not return_overflowing_tokens and return_tensors is None:
            data = {k: v[0] for k, v in data.items()}
        if return_tensors is not None:
            data = _as_tensors(data, return_tensors)
        return BatchEncoding(data, rows, offsets_fn, n_sequences=1 if seconds is None else 2)

    def _set_truncation_and_padding(
        self,
        padding: bool | str,
        truncation: bool | str,
        max_length: int | None,
        stride: int,
        pad_to_multiple_of: int | None,
        is_pair: bool,
    ) -> None:
        backend = self._backend
        if max_length is not None and (not isinstance(max_length, int) or max_length < 0):
            raise ConfigError(f"max_length must be a non-negative int or None, got {max_length!r}")
        if not isinstance(stride, int) or stride < 0:
            raise ConfigError(f"stride must be a non-negative int, got {stride!r}")
        if pad_to_multiple_of is not None and (
            not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of <= 0
        ):
            raise ConfigError(f"pad_to_multiple_of must be a positive int, got {pad_to_multiple_of!r}")

        if truncation in (False, None, "do_not_truncate"):
            strategy = None
        elif truncation in _TRUNCATION:
            strategy = _TRUNCATION[truncation]
        else:
            raise ConfigError(
                f"truncation={truncation!r} is not valid; use True, False, 'longest_first', "
                "'only_first', 'only_second' or 'do_not_truncate'"
            )
        if padding in (False, None, "do_not_pad"):
            pad_mode = None
        elif padding in _PADDING:
            pad_mode = _PADDING[padding]
        else:
            raise ConfigError(
                f"padding={padding!r} is not valid; use True, False, 'longest', 'max_length' or 'do_not_pad'"
            )

        limit = max_length
        if limit is None and (strategy or pad_mode == "max_length"):
            limit = self.model_max_length
            if limit >= VERY_LARGE_INTEGER:
                logger.warning(
                    "no max_length given and the tokenizer has no model_max_length; "
                    "not truncating / padding to max_length"
                )
                strategy = None
                if pad_mode == "max_length":
                    pad_mode = "longest"
        if strategy is not None:
            n_special = self.num_special_tokens_to_add(is_pair)
            if _stride_too_large(stride, limit, n_special):
                raise ConfigError(
                    f"stride={stride} must be smaller than max_length={limit} minus the "
                    f"{n_special} special tokens; lower stride or raise max_length"
                )
            if strategy == "only_second" and not is_pair:
                raise ConfigError("truncation='only_second' needs a text_pair")
            backend.enable_truncation(limit, stride=stride, strategy=strategy, direction="right")
        else:
            backend.no_truncation()
        if pad_mode is not None:
            backend.enable_padding(
                direction="right",
                pad_id=self.pad_token_id,
                pad_type_id=0,
                pad_token=self.pad_token,
                length=limit if pad_mode == "max_length" else None,
                pad_to_multiple_of=pad_to_multiple_of,
            )
        else:
            backend.no_padding()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(vocab_size={self.vocab_size}, "
            f"model_max_length={self.model_max_length})"
        )


def _stride_too_large(stride: int, limit: int, n_special: int) -> bool:
    """True when the Rust side would panic: stride must leave room for new tokens."""
    return stride > 0 and stride >= limit - n_special


def _to_id_list(ids: Any) -> Any:
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, int):
        return [ids]
    return list(ids)


def _check_text(value: Any, what: str, words: bool) -> None:
    """TypeError naming the input for a non-string."""
    items = value if words else (value,)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(
                f"{what} must be a str{' (a list of words)' if words else ''}, "
                f"got {type(item).__name__}: {item!r:.60}"
            )


def _raise_on_surrogate(items: list[Any], name: str, batched: bool) -> None:
    """DataError for text the Rust side cannot take: lone surrogates are not valid UTF-8."""
    for i, value in enumerate(items):
        words = isinstance(value, (list, tuple))  # pre-tokenized (is_split_into_words): name the word
        for j, item in enumerate(value if words else (value,)):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                what = f"{name}[{i}]" if batched else name
                where = (f"word {j} ({item!r}), at character {err.start} of that word" if words
                         else f"character {err.start}")
                raise DataError(
                    f"{what} holds a lone surrogate {item[err.start]!r} at {where}; "
                    "text must be valid Unicode (decode bytes with errors='replace')"
                ) from None


def _batch_inputs(text: Any, text_pair: Any, is_split_into_words: bool):
    """Decide single vs batch like transformers and validate every element."""

    def is_batch(x: Any) -> bool:
        if isinstance(x, str):
            return False
        if not isinstance(x, (list, tuple)):
            return False
        if not is_split_into_words:
            return True
        return len(x) > 0 and isinstance(x[0], (list, tuple))

    if text is None or not isinstance(text, (str, list, tuple)):
        raise TypeError(
            "text must be a str, a list of str, or (with is_split_into_words=True) a list of "
            f"words or a list of lists of words; got {type(text).__name__}"
        )
    batched = is_batch(text)
    firsts = list(text) if batched else [text]
    seconds = None
    if text_pair is not None:
        if not isinstance(text_pair, (str, list, tuple)):
            raise TypeError(f"text_pair must be like text, got {type(text_pair).__name__}")
        if is_batch(text_pair) != batched:
            raise TypeError("text and text_pair must both be single inputs or both be batches")
        seconds = list(text_pair) if batched else [text_pair]
        if len(seconds) != len(firsts):
            raise DataError(
                f"text has {len(firsts)} items but text_pair has {len(seconds)}; they must pair up"
            )
    for i, t in enumerate(firsts):
        _check_text(t, f"text[{i}]" if batched else "text", is_split_into_words)
    if seconds is not None:
        for i, t in enumerate(seconds):
            _check_text(t, f"text_pair[{i}]" if batched else "text_pair", is_split_into_words)
    return batched, firsts, seconds


def _as_tensors(data: dict[str, Any], kind: str) -> dict[str, Any]:
    if kind not in ("pt", "np"):
        raise ConfigError(f"return_tensors={kind!r} is not supported; use 'pt', 'np' or None")
    out = {}
    for key, value in data.items():
        rows = value if isinstance(value, list) and value and isinstance(value[0], list) else None
        if rows is not None and len({len(r) for r in rows}) > 1:
            raise ConfigError(
                f"cannot make a tensor of {key}: rows have different lengths; pass padding=True "
                "(or 'max_length') together with return_tensors"
            )
        if kind == "pt":
            import torch

            out[key] = torch.tensor(value, dtype=torch.long)
        else:
            import numpy as np

            out[key] = np.asarray(value, dtype=np.int64)
    return out

