"""Vocabulary pruning: keep the tokens a task's data uses (plus the special tokens), remap the
embedding matrix and the tokenizer, and save both as a normal model directory (transformers
loads it; docs/compress.md).

    result = prune_vocabulary("runs/sentiment-reviews", texts, "runs/sentiment-small")
    result.kept, result.model_bytes_before, result.model_bytes_after

The kept tokens keep their order (so the special tokens keep their ids when they come first, as
in every ERNIE/BERT vocabulary); every parameter with a row per token (the word embeddings, a
masked-LM head's decoder bias) keeps the rows of the kept tokens. On the texts it was pruned
with, the new tokenizer gives the same tokens (WordPiece's longest-match-first only ever used
kept pieces there, and no longer piece is added), so the pruned model's outputs on them are the
original's exactly; this is checked on the texts before anything is written. Other text may
meet a token that was dropped: it becomes [UNK] (pass a corpus of the text the model will see,
`min_count` 1, to keep what matters). The new directory stores its weights as the source does
(int8 rows, fp16 or fp32: `nlp.models.release.weight_storage`) and holds the task's own files
the source holds (`spec.model_files`: a lexical model's word lexicon).

An XLM-R unigram tokenizer (tokenizer.json, nlp/tokenizer/unigram.py) is rebuilt from the kept
pieces with their scores, in their old order, under the same normaliser and pre-tokenizer. The
Viterbi search then picks the same pieces on the texts (its best path is made of kept pieces, and
dropping other pieces only removes paths that scored no better), provided the unknown piece's
score stays put: tokenizers scores it 10 below the lowest piece, so the lowest-scored piece is
kept too. A model whose embedding has more rows than its tokenizer has pieces (multilingual-e5-
small: 250,037 rows for 250,002 pieces) loses the rows no piece can reach.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import torch

from nlp._common import ConfigError, atomic_directory, check_output_path
from nlp.models import PreTrainedEncoder
from nlp.models.release import save_stored_as, weight_storage
from nlp.tasks.model_dirs import locate_model
from nlp.tokenizer import Tokenizer, UnigramTokenizer, load_tokenizer
from nlp.tokenizer.wordpiece import WordPieceTokenizer

__all__ = ["VocabPruneResult", "prune_vocabulary", "prune_model_vocab", "token_counts"]

logger = logging.getLogger(__name__)


@dataclass
class VocabPruneResult:
    out: Path
    vocab_before: int
    kept: int
    texts: int
    model_bytes_before: int  # model.safetensors of the source
    model_bytes_after: int
    param_bytes_before: int  # the parameters in fp32 (a file may be stored in fp16)
    param_bytes_after: int


def token_counts(tokenizer: Tokenizer, texts: Iterable[str], batch_size: int = 1000) -> Counter:
    """How often each token id occurs in `texts` (special tokens included)."""
    counts: Counter = Counter()
    batch: list[str] = []
    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            counts.update(i for row in tokenizer(batch)["input_ids"] for i in row)
            batch = []
    if batch:
        counts.update(i for row in tokenizer(batch)["input_ids"] for i in row)
    return counts


def prune_model_vocab(model: PreTrainedEncoder, keep: Sequence[int]) -> PreTrainedEncoder:
    """A copy of `model` whose vocabulary is the token ids `keep` (in that order): every
    parameter with one row per token keeps those rows."""
    index = torch.as_tensor(list(keep), dtype=torch.long)
    pad = model.config.pad_token_id
    new_pad = list(keep).index(pad) if pad is not None and pad in keep else pad
    pruned = type(model)(model.config.replace(vocab_size=len(keep), pad_token_id=new_pad))
    # A tensor has one row per token when its shape follows vocab_size, which the pruned model's
    # own shapes tell; comparing a dimension with vocab_size alone would also cut a LayerNorm
    # whose hidden size happens to equal it.
    target = pruned.state_dict()
    state = {k: v.index_select(0, index) if v.shape != target[k].shape else v
             for k, v in model.state_dict().items()}
    pruned.load_state_dict(state)
    return pruned


def _kept_ids(tokenizer: Tokenizer, counts: Counter, vocab_size: int, min_count: int) -> list[int]:
    """The token ids to keep, ascending: the special ones, those seen `min_count` times, and for a
    unigram tokenizer its lowest-scored piece (which sets the unknown piece's score)."""
    keep = {i for i in tokenizer.all_special_ids}
    keep |= {i for i, n in counts.items() if n >= min_count}
    if isinstance(tokenizer, UnigramTokenizer):
        scores = [s for _, s in tokenizer.pieces()]
        keep.add(min(range(len(scores)), key=scores.__getitem__))
    return sorted(i for i in keep if i < min(vocab_size, tokenizer.vocab_size))


def _pruned_tokenizer(tokenizer: Tokenizer, keep: Sequence[int]) -> Tokenizer:
    if isinstance(tokenizer, UnigramTokenizer):
        return _pruned_unigram(tokenizer, keep)
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise ConfigError(f"vocabulary pruning rewrites WordPiece and unigram vocabularies (vocab.txt, "
                          f"tokenizer.json); this model's tokenizer is a {type(tokenizer).__name__}")
    inverse = {i: t for t, i in tokenizer.get_vocab().items()}
    vocab = {inverse[old]: new for new, old in enumerate(keep)}
    return WordPieceTokenizer(vocab, do_lower_case=tokenizer.do_lower_case, strip_accents=tokenizer.strip_accents,
                              tokenize_chinese_chars=tokenizer.tokenize_chinese_chars,
                              model_max_length=tokenizer.model_max_length
                              if tokenizer.model_max_length < 10**12 else None,
                              **tokenizer.special_tokens_map)


def _pruned_unigram(tokenizer: UnigramTokenizer, keep: Sequence[int]) -> UnigramTokenizer:
    """The same tokenizer.json with the unigram model's vocabulary cut to `keep` (scores kept)."""
    import json

    import tokenizers

    data = json.loads(tokenizer.backend_tokenizer.to_str())
    pieces = data["model"]["vocab"]
    unk = data["model"]["unk_id"]
    if unk not in keep:
        raise ConfigError(f"the unknown piece (id {unk}) must be kept")
    data["model"]["vocab"] = [pieces[i] for i in keep]
    data["model"]["unk_id"] = list(keep).index(unk)
    data["added_tokens"] = []  # the special tokens are added again, at their new ids
    data["post_processor"] = None
    data["truncation"] = data["padding"] = None
    backend = tokenizers.Tokenizer.from_str(json.dumps(data))
    max_len = tokenizer.model_max_length
    return UnigramTokenizer(backend, model_max_length=max_len if max_len < 10**12 else None,
                            **tokenizer.special_tokens_map)


def _check_same_tokens(old: Tokenizer, new: Tokenizer, keep: Sequence[int], texts: Sequence[str]) -> None:
    """RuntimeError unless each text made of kept tokens only splits into the same tokens."""
    remap = {o: n for n, o in enumerate(keep)}
    for start in range(0, len(texts), 1000):
        part = list(texts[start:start + 1000])
        a, b = old(part)["input_ids"], new(part)["input_ids"]
        for text, x, y in zip(part, a, b):
            if any(i not in remap for i in x):  # a token below min_count: [UNK] now, by design
                continue
            if [remap[i] for i in x] != list(y):
                raise RuntimeError(f"the pruned tokenizer splits {text[:40]!r} otherwise than the original; "
                                   "nothing was written (please report this)")


def prune_vocabulary(source: str | os.PathLike, texts: Sequence[str], out: str | os.PathLike, *,
                     min_count: int = 1, task: str | None = None) -> VocabPruneResult:
    """Write to `out` the model of `source` (a run or model directory) keeping the tokens that
    occur at least `min_count` times in `texts`, and every special token. ConfigError when `out`
    exists, or the texts are empty."""
    out = check_output_path(out, "--out", directory=True, new=True)  # before any work
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ConfigError(f"--min-count {min_count!r}: give a positive number of occurrences")
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise ConfigError("no texts to take the vocabulary from: give the task's training (and dev) texts, "
                          "or a corpus of the text the model will see")
    where = locate_model(source, task)
    tokenizer = load_tokenizer(where.model_dir)
    model = where.spec.head.from_pretrained(where.model_dir).eval()
    # The prompts a model declares (config.json `prompts`: e5's "query: ") go before every text it
    # embeds, so their pieces are kept whatever the texts hold (at min_count: counted that often).
    prompts = [p for p in (model.config.extra.get("prompts") or {}).values() if isinstance(p, str) and p.strip()]
    counts = token_counts(tokenizer, texts + [p for p in prompts for _ in range(min_count)])
    keep = _kept_ids(tokenizer, counts, model.config.vocab_size, min_count)
    new_tok = _pruned_tokenizer(tokenizer, keep)
    _check_same_tokens(tokenizer, new_tok, keep, texts + [p + t for p in prompts for t in texts[:100]])
    pruned = prune_model_vocab(model, keep)
    storage = weight_storage(where.model_dir / "model.safetensors")  # int8 rows stay int8 rows, fp16 fp16
    with atomic_directory(out) as tmp:
        save_stored_as(pruned, tmp, storage)
        new_tok.save_pretrained(tmp)
        where.spec.copy_model_files(where.model_dir, tmp)  # the task's own files (a lexical model's word lexicon)
    n_params = lambda m: sum(p.numel() for p in m.state_dict().values()) * 4  # noqa: E731
    before = where.model_dir / "model.safetensors"
    logger.info("kept %d of %d tokens", len(keep), model.config.vocab_size)
    return VocabPruneResult(out=out, vocab_before=model.config.vocab_size, kept=len(keep), texts=len(texts),
                            model_bytes_before=before.stat().st_size if before.is_file() else 0,
                            model_bytes_after=(out / "model.safetensors").stat().st_size,
                            param_bytes_before=n_params(model), param_bytes_after=n_params(pruned))
