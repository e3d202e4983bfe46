"""jieba + BPE hybrid tokenizer: one token per known word, learned BPE pieces for the rest.

Pipeline for a batch of texts:

1. fold (nlp/tokenizer/_fold.py): a 1:1 character table (full-width -> half-width,
   lower-case, controls/whitespace -> space), so offsets in the folded text are offsets in
   the original text; one numpy lookup for the whole batch;
2. segment with jieba's dictionary (rjieba fast path; HMM off by default), user words kept;
3. join each text's words with one space, whitespace words left out (they make no token, as
   in BERT): "我爱 北京" -> "我 爱  北京". The folded whitespace is NUL on this path, which
   jieba cuts as a word of its own and the join then deletes, so the word numbered k starts
   exactly k characters to the right of where it starts in the original text;
4. hand the joined strings to a `tokenizers` BPE model as raw text; its pre-tokenizer is
   `WhitespaceSplit`, so the words are jieba's (`word_ids` number the non-space words) and
   everything from here runs in Rust, on all cores (`ignore_merges=True`: a word in the
   vocabulary is one token; any other word is split by the learned merges, down to single
   characters, `##`-prefixed after the first piece; a character outside the vocabulary is one
   [UNK], never dropped);
5. the Rust side adds [CLS]/[SEP], truncates, strides, pads (shared with WordPiece via
   `Tokenizer`). Offsets, only when asked for, are the Rust offsets minus the word id.

Big batches run steps 1-3 of chunk k+1 while Rust encodes chunk k on a worker thread (rjieba
and `encode_batch` release the GIL), so where a core is free, segmentation adds no wall time.

Step 3 relies on no special token matching inside the joined text: true when each special
token starts with ASCII punctuation that jieba always cuts alone ("[CLS]", "<s>"). For other
special tokens the words go to the backend pre-tokenized (slower, same results).

Not handled: special-token strings typed into raw text ("[MASK]") are segmented like other
text, since jieba splits them; masking for pre-training works on ids.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

import tokenizers
from tokenizers import decoders, models, pre_tokenizers

from nlp._common import ConfigError
from nlp.tokenizer._files import check_dir, read_json
from nlp.tokenizer._fold import fold_batch, fold_table
from nlp.tokenizer.base import SPECIAL_TOKEN_NAMES, VERY_LARGE_INTEGER, Tokenizer
from nlp.tokenizer.segmenter import JiebaSegmenter

__all__ = ["HybridTokenizer"]

_SPACE_NEXT_TO_NON_ASCII = re.compile(r" (?=[^\x00-\x7f])|(?<=[^\x00-\x7f]) ")
# Folded whitespace on the joined-text path: jieba cuts NUL as a word of its own (like a space),
# and no text holds a NUL after folding (controls fold to whitespace).
_GAP = "\x00"
# ASCII punctuation that both jieba backends always cut as a one-character word (their "han"
# character class, which words are made of, also holds letters, digits and "+#&._%-").
_CUT_ALONE = frozenset(string.punctuation) - frozenset("+#&._%-")
# Texts per stage of the segment/encode pipeline: big enough that each encode_batch keeps every
# core busy, small enough that the first stage (not overlapped) is short.
_PIPELINE_CHUNK = 512


class HybridTokenizer(Tokenizer):
    """jieba words + BPE pieces; same call signature and outputs as `WordPieceTokenizer`.

    `stats` counts, over every call, the rows encoded, their non-special tokens and how many
    of those are [UNK] (`unk_rate`); `unknown_chars(texts)` names the culprits.
    """

    tokenizer_class = "HybridTokenizer"

    def __init__(
        self,
        vocab: dict[str, int] | None = None,
        merges: list[tuple[str, str]] | None = None,
        *,
        backend: tokenizers.Tokenizer | None = None,
        user_words: Iterable[str] = (),
        hmm: bool = False,
        segmenter_backend: str = "auto",
        do_lower_case: bool = True,
        fold_width: bool = True,
        model_max_length: int | None = None,
        **special_tokens: Any,
    ) -> None:
        if (vocab is None) == (backend is None):
            raise ConfigError("give exactly one of vocab (+ merges) or backend (a tokenizers.Tokenizer)")
        if backend is None:
            unk = special_tokens.get("unk_token") or "[UNK]"
            if unk not in vocab:
                raise ConfigError(f"unk_token {unk!r} is not in the hybrid vocabulary")
            backend = tokenizers.Tokenizer(
                models.BPE(
                    vocab,
                    list(merges or []),
                    unk_token=unk,
                    continuing_subword_prefix="##",
                    ignore_merges=True,
                    fuse_unk=False,
                )
            )
        if type(backend.model).__name__ != "BPE":
            raise ConfigError(f"a HybridTokenizer needs a BPE model, got {type(backend.model).__name__}")
        backend.normalizer = None
        # The words arrive space-separated (or pre-tokenized); whitespace makes no token.
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)
        self.do_lower_case = bool(do_lower_case)
        self.fold_width = bool(fold_width)
        self._fold = fold_table(self.do_lower_case, self.fold_width)
        self.segmenter = JiebaSegmenter(
            [w.translate(self._fold) for w in user_words], hmm=hmm, backend=segmenter_backend
        )
        self.stats: Counter = Counter()
        super().__init__(backend, model_max_length=model_max_length, **special_tokens)
        added = [t.content for t in backend.get_added_tokens_decoder().values()]
        self._joined_ok = all(t[:1] in _CUT_ALONE and not any(c.isspace() for c in t) for t in added)

    # ---- segmentation ------------------------------------------------------------------
    def add_word(self, word: str) -> None:
        """A user dictionary word: jieba keeps it whole. Add it to the vocabulary to make it
        one token (train with `user_words=` to get it in), else BPE splits it."""
        self.segmenter.add_word(word.translate(self._fold))

    def segment(self, texts: list[str]) -> tuple[list[list[str]], list[list[int]]]:
        """Folded non-space words of each text and their start offsets in the text."""
        fold = self._fold
        cut = self.segmenter.cut_batch([t.translate(fold) for t in texts])
        all_words, all_starts = [], []
        for words in cut:
            kept, starts, pos = [], [], 0
            for w in words:
                if not w.isspace():
                    kept.append(w)
                    starts.append(pos)
                pos += len(w)
            all_words.append(kept)
            all_starts.append(starts)
        return all_words, all_starts

    def _joined(self, texts: list[str]) -> list[str]:
        """Each text folded and cut, its non-space words joined by one space (step 3)."""
        folded = fold_batch(texts, self.do_lower_case, self.fold_width, space=_GAP)
        return self.segmenter.cut_spaced(folded, drop=_GAP)

    def _encode(self, firsts, seconds, is_split_into_words, add_special_tokens, unspaced_words=False):
        if is_split_into_words:  # no word-start marks: unspaced_words changes nothing
            fold = self._fold
            a = [[w.translate(fold) for w in ws] for ws in firsts]
            b = None if seconds is None else [[w.translate(fold) for w in ws] for ws in seconds]
            inputs = a if b is None else list(zip(a, b))
            # offsets stay relative to each given word, as transformers does
            return self._backend.encode_batch(
                inputs, is_pretokenized=True, add_special_tokens=add_special_tokens
            ), None
        if not self._joined_ok:
            return self._encode_words(firsts, seconds, add_special_tokens)
        backend = self._backend

        def joined(lo: int, hi: int) -> list:
            a = self._joined(firsts[lo:hi])
            return a if seconds is None else list(zip(a, self._joined(seconds[lo:hi])))

        n = len(firsts)
        pad = backend.padding
        if n < 2 * _PIPELINE_CHUNK or (pad is not None and pad["length"] is None):
            # small batch, or padding to the batch's longest row (chunks would pad differently)
            return backend.encode_batch(joined(0, n), add_special_tokens=add_special_tokens), _unshift_offsets
        # Pipeline: jieba cuts chunk k+1 here while Rust encodes chunk k on the worker thread
        # (rjieba and encode_batch both release the GIL), so segmenting costs no wall time
        # where a core is free. A thread per call, not a pool: nothing alive across a fork.
        pool = ThreadPoolExecutor(1, thread_name_prefix="hybrid-encode")
        try:
            futures = [
                pool.submit(backend.encode_batch, joined(lo, lo + _PIPELINE_CHUNK),
                            add_special_tokens=add_special_tokens)
                for lo in range(0, n, _PIPELINE_CHUNK)
            ]
            encodings = [e for f in futures for e in f.result()]
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # on an error, run no queued chunk
        return encodings, _unshift_offsets

    def _encode_words(self, firsts, seconds, add_special_tokens):
        """Words handed over pre-tokenized; for special tokens that could match joined text."""
        words_a, starts_a = self.segment(firsts)
        if seconds is None:
            inputs, starts_b = words_a, None
        else:
            words_b, starts_b = self.segment(seconds)
            inputs = list(zip(words_a, words_b))
        encodings = self._backend.encode_batch(
            inputs, is_pretokenized=True, add_special_tokens=add_special_tokens
        )

        def map_offsets(enc: tokenizers.Encoding, sample: int) -> list[tuple[int, int]]:
            sa = starts_a[sample]
            sb = starts_b[sample] if starts_b is not None else None
            out = []
            for wid, sid, (s, e) in zip(enc.word_ids, enc.sequence_ids, enc.offsets):
                if wid is None:
                    out.append((0, 0))
                else:
                    base = (sa if sid == 0 else sb)[wid]
                    out.append((base + s, base + e))
            return out

        return encodings, map_offsets

    def _after_encode(self, encodings: list[tokenizers.Encoding], ids: list[list[int]] | None) -> None:
        unk = self.unk_token_id
        if ids is None:
            ids = [e.ids for e in encodings]
        n_unk = sum(row.count(unk) for row in ids)
        n_tok = sum(map(len, ids)) - sum(sum(e.special_tokens_mask) for e in encodings)
        self.stats["rows"] += len(encodings)
        self.stats["tokens"] += n_tok
        self.stats["unk"] += n_unk

    @property
    def unk_rate(self) -> float:
        """[UNK] tokens / non-special tokens over every call so far (0.0 before any)."""
        return self.stats["unk"] / self.stats["tokens"] if self.stats["tokens"] else 0.0

    def unknown_chars(self, texts: Iterable[str]) -> Counter:
        """Characters of `texts` that become [UNK] (not in the vocabulary even alone)."""
        vocab = self._backend.get_vocab(with_added_tokens=False)
        out: Counter = Counter()
        for t in texts:
            for c in t.translate(self._fold):
                if c != " " and c not in vocab:
                    out[c] += 1
        return out

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        """Joined words; a space is kept only between two ASCII neighbours ("hello world")."""
        text = super().decode(ids, skip_special_tokens=skip_special_tokens)
        return _SPACE_NEXT_TO_NON_ASCII.sub("", text)

    # ---- files -------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, directory: str | Path, **overrides: Any) -> "HybridTokenizer":
        path = check_dir(directory)
        config = read_json(path / "tokenizer_config.json")
        config.update(overrides)
        if not (path / "tokenizer.json").is_file():
            raise ConfigError(
                f"{path} has no tokenizer.json; a hybrid tokenizer directory is written by "
                "save_pretrained or `nlp tokenizer train`"
            )
        try:
            backend = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as err:
            raise ConfigError(f"{path / 'tokenizer.json'} could not be read: {err}") from None
        user_words = config.get("user_words", [])
        if not isinstance(user_words, list) or not all(isinstance(w, str) for w in user_words):
            raise ConfigError(f"user_words in {path / 'tokenizer_config.json'} must be a list of strings")
        max_len = config.get("model_max_length")
        return cls(
            backend=backend,
            user_words=user_words,
            hmm=bool(config.get("hmm", False)),
            segmenter_backend=config.get("segmenter_backend", "auto"),
            do_lower_case=config.get("do_lower_case", True),
            fold_width=config.get("fold_width", True),
            model_max_length=int(max_len) if max_len and max_len < VERY_LARGE_INTEGER else None,
            **{n: config[n] for n in SPECIAL_TOKEN_NAMES if config.get(n)},
        )

    def _config_fields(self) -> dict[str, Any]:
        return {
            "do_lower_case": self.do_lower_case,
            "fold_width": self.fold_width,
            "hmm": self.segmenter.hmm,
            "user_words": list(self.segmenter.user_words),
        }


def _unshift_offsets(enc: tokenizers.Encoding, sample: int) -> list[tuple[int, int]]:
    """Offsets in the joined text -> offsets in the original: word k sits k spaces further right
    (for either text of a pair: each side numbers its own words from 0)."""
    return [(s - w, e - w) if w is not None else (0, 0) for (s, e), w in zip(enc.offsets, enc.word_ids)]
