"""Masked-LM pretraining with whole-word masking: what `nlp pretrain RECIPE.yaml` runs.

A pretraining recipe has five sections::

    model:     {preset: ernie-3.0-tiny-nano-v2-zh, init: random, config: {hidden_size: 256}}
               # or {name: DIR}: continue pretraining a saved model
    tokenizer: {vocab_size: 20000}      # trained on the corpus (jieba+BPE); or {name: DIR}
    corpus:    {sources: [peoples-daily, sanguo, reviews], max_length: 128}
    masking:   {mlm_probability: 0.15}  # whole jieba words, 80/10/10
    train:     {...}                    # nlp.train.TrainSettings, the same engine as fine-tuning

The run directory is the fine-tuning one (checkpoints, resume, metrics.jsonl, loss.png,
summary.json, model/), plus `tokenizer/` (trained once, reused on resume: BPE ties make a
retrained vocabulary differ) and `model/` gets the tokenizer files too, so that it is a
complete model directory. Evaluation reports the MLM loss and the accuracy on masked tokens
of `corpus.eval_rows` held-back rows, masked once and identically at every evaluation.

The loop is `nlp.train.Trainer`; what is specific to pretraining is the data (packed rows,
`nlp.tokenizer.masking`) and the masked-LM model with `sparse_logits=True`, which runs the
vocabulary projection only on the ~15% of positions that carry a label: at this model size that
projection would otherwise cost more than the whole encoder.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np
import torch
import yaml

from nlp._common import ConfigError, did_you_mean
from nlp.models import ErnieConfig, ErnieForMaskedLM, preset_config
from nlp.tokenizer import load_tokenizer, train_hybrid_tokenizer, train_wordpiece_tokenizer
from nlp.tokenizer.masking import (
    PackedRows,
    WholeWordMaskCollator,
    jieba_word_ids,
    pack_rows,
)
from nlp.tokenizer.samplers import DistributedBatchSampler
from nlp.train.corpus import CORPUS_SOURCES, build_corpus, write_lines
from nlp.train.evaluation import EvalPrediction
from nlp.train.recipe import ModelSection, TokenizerTraining, check_model_section
from nlp.train.run_dir import write_run_files
from nlp.train.schema import Problem, Settings, build, format_problems, read_yaml, to_dict
from nlp.train.settings import TrainSettings
from nlp.train.trainer import Trainer, TrainResult

__all__ = [
    "CorpusSection",
    "MaskingSection",
    "PretrainRecipe",
    "PretrainResult",
    "PretrainTokenizerSection",
    "load_pretrain_recipe",
    "pretrain",
    "pretrain_recipe_from_dict",
]

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TOKENIZER_KINDS = ("hybrid", "wordpiece")


@dataclass
class PretrainTokenizerSection(TokenizerTraining):
    """A tokenizer directory to use as is (`name`), or a vocabulary to train (`kind`; the
    training knobs are fine-tuning's `tokenizer.train` ones)."""

    vocab_size: int = 20000  # larger: shorter sequences, bigger embedding (the bulk of a tiny model)
    name: str | None = None  # a tokenizer directory (WordPiece or hybrid); null: train one
    # wordpiece: one token per Chinese character (ERNIE 1.0 / bert-base-chinese; whole-word
    # masking still masks jieba words); hybrid: jieba words + BPE pieces (shorter rows)
    kind: str = "hybrid"

    def problems(self) -> Iterator[Problem]:
        if self.kind not in TOKENIZER_KINDS:
            yield Problem("kind", f"kind must be one of {', '.join(TOKENIZER_KINDS)}, got {self.kind!r}."
                                  f"{did_you_mean(self.kind, TOKENIZER_KINDS)}")
        yield from super().problems()
        if self.name is not None and not Path(self.name).expanduser().is_dir():
            yield Problem("name", f"name: {self.name!r} is not a tokenizer directory")


@dataclass
class CorpusSection(Settings):
    """Which texts, and how they become rows."""

    sources: list[str] = field(default_factory=lambda: list(CORPUS_SOURCES))  # see nlp.train.corpus
    files: list[str] = field(default_factory=list)  # more UTF-8 text files, one document a line
    max_length: int = 128  # tokens per packed row, [CLS] and [SEP] included; longer = slower per token
    eval_rows: int = 256  # rows held back for the MLM loss/accuracy evaluation (0: none)
    max_documents: int | None = None  # the first N documents of each source (quick runs, tests)
    # share of documents fed character by character (as NER feeds a hybrid tokenizer), still
    # masked by whole jieba words: 0 for word-level only; helps character-level fine-tuning
    char_level_fraction: float = 0.0

    def problems(self) -> Iterator[Problem]:
        for s in self.sources:
            if s not in CORPUS_SOURCES:
                yield Problem("sources", f"sources: unknown source {s!r}.{did_you_mean(s, CORPUS_SOURCES)} "
                                         f"Valid: {', '.join(CORPUS_SOURCES)}")
        if not self.sources and not self.files:
            yield Problem("sources", "sources and files are both empty: nothing to pretrain on")
        for f in self.files:
            if not Path(f).expanduser().is_file():
                yield Problem("files", f"files: {f!r} does not exist")
        if self.max_length < 8:
            yield Problem("max_length", f"max_length must be >= 8, got {self.max_length}")
        if self.eval_rows < 0:
            yield Problem("eval_rows", f"eval_rows must be >= 0, got {self.eval_rows}")
        if not 0.0 <= self.char_level_fraction <= 1.0:
            yield Problem("char_level_fraction",
                          f"char_level_fraction must lie in [0, 1], got {self.char_level_fraction}")
        if self.max_documents is not None and self.max_documents < 1:
            yield Problem("max_documents", f"max_documents must be >= 1 or null, got {self.max_documents}")


@dataclass
class MaskingSection(Settings):
    """Whole-word masking (nlp.tokenizer.masking.WholeWordMaskCollator)."""

    mlm_probability: float = 0.15  # share of tokens to predict; higher: more signal, less context
    mask_ratio: float = 0.8  # of those: replaced by [MASK]
    random_ratio: float = 0.1  # of those: replaced by a random token (the rest stay unchanged)

    def problems(self) -> Iterator[Problem]:
        if not 0.0 < self.mlm_probability < 1.0:
            yield Problem("mlm_probability", f"mlm_probability must lie in (0, 1), got {self.mlm_probability}")
        if self.mask_ratio < 0 or self.random_ratio < 0 or self.mask_ratio + self.random_ratio > 1:
            yield Problem("mask_ratio", "mask_ratio and random_ratio must be >= 0 and sum to at most 1")


@dataclass
class PretrainModelSection(ModelSection):
    """The model section of fine-tuning recipes, plus how fresh position embeddings start."""

    # sinusoidal: the position table starts as Transformer sin/cos waves (same scale as the other
    # embeddings) instead of noise, so attention can find neighbours from the first steps; the
    # table stays a learned parameter of the ordinary ERNIE/BERT architecture
    position_init: Literal["normal", "sinusoidal"] = "normal"
    # grow a pretrained model deeper (init: pretrained): new layer i starts as a copy of the
    # loaded model's layer layer_map[i], e.g. [0, 1, 2, 1, 2, 3] makes 6 layers of 4 (depth
    # growth by copying, as in Gong et al. 2019 "progressive stacking"); null: keep the layers
    layer_map: list[int] | None = None

    def problems(self) -> Iterator[Problem]:
        if self.layer_map is None:
            return
        if self.init != "pretrained" or self.name is None:
            yield Problem("layer_map", "layer_map grows a pretrained model: it needs model.name and "
                                       "init: pretrained")
        if not self.layer_map or any(not isinstance(i, int) or i < 0 for i in self.layer_map):
            yield Problem("layer_map", f"layer_map must be a non-empty list of layer indices >= 0, "
                                       f"got {self.layer_map!r}")


@dataclass
class PretrainRecipe(Settings):
    model: PretrainModelSection = field(
        default_factory=lambda: PretrainModelSection(preset="ernie-3.0-tiny-nano-v2-zh", init="random"))
    tokenizer: PretrainTokenizerSection = field(default_factory=PretrainTokenizerSection)
    corpus: CorpusSection = field(default_factory=CorpusSection)
    masking: MaskingSection = field(default_factory=MaskingSection)
    train: TrainSettings = field(default_factory=TrainSettings)


def pretrain_recipe_from_dict(data: Mapping[str, Any] | None, *, source: str | None = None,
                              check_model: Callable[[str], None] | None = None) -> PretrainRecipe:
    """Build and check a PretrainRecipe; one ConfigError lists every problem."""
    errors: list[str] = []
    recipe = build(PretrainRecipe, data, errors, source=source)
    errors += check_model_section(recipe.model, check_model)
    if errors:
        raise ConfigError(format_problems(errors, source))
    return recipe


def load_pretrain_recipe(path: str | Path, overrides: Sequence[str] = (), *,
                         check_model: Callable[[str], None] | None = None) -> PretrainRecipe:
    """Read a pretraining recipe, apply `key.sub=value` overrides, build and check it."""
    data = read_yaml(path, overrides, missing_hint="The built-in one: recipes/pretrain/ernie-tiny-zh.yaml.")
    return pretrain_recipe_from_dict(data, source=str(path), check_model=check_model)


# --------------------------------------------------------------------------- the model


def _labelled_predictions(outputs: Any, batch: Mapping[str, Any]) -> torch.Tensor:
    """(B, T) argmax of the sparse logits at the labelled positions, -100 elsewhere."""
    labels = batch["labels"]
    predictions = torch.full_like(labels, -100)
    predictions[labels.ne(-100)] = outputs.logits.detach().argmax(-1)
    return predictions


def _mlm_accuracy(pred: EvalPrediction) -> dict[str, float]:
    p = np.concatenate([np.asarray(r).reshape(-1) for r in pred.predictions])
    y = np.concatenate([np.asarray(r).reshape(-1) for r in pred.label_ids])
    keep = y != -100
    return {"mlm_accuracy": float((p[keep] == y[keep]).mean()) if keep.any() else 0.0}


class _MaskEpochSampler:
    """The trainer's batch sampler, which also tells the collator the epoch: masks are drawn
    from (seed, epoch, row), so a new epoch masks anew and a resumed one masks the same."""

    def __init__(self, inner: DistributedBatchSampler, collator: WholeWordMaskCollator) -> None:
        self.inner, self.collator = inner, collator

    def set_epoch(self, epoch: int) -> None:
        self.inner.set_epoch(epoch)
        self.collator.set_epoch(epoch)

    def __iter__(self):
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


class _WriteRunFiles:
    """Writes the run's own files (tokenizer/, recipe.yaml) once the engine has accepted the
    output directory (it refuses a non-empty one without checkpoints): the on_train_start hook."""

    def __init__(self, files: dict[str, Any]) -> None:
        self.files = files

    def on_train_start(self, trainer: Trainer, state: Any) -> None:
        if trainer.accelerator.is_main_process:
            write_run_files(trainer.output_dir, self.files)  # atomic, as fine-tuning's


class _Subset:
    """Rows `indices` of a PackedRows, keeping each row's own row_id (its masking seed)."""

    def __init__(self, rows: PackedRows, indices: Sequence[int]) -> None:
        self.rows, self.indices = rows, list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[self.indices[i]]


# --------------------------------------------------------------------------- data


def _tokenizer_for(recipe: PretrainRecipe, out: Path, documents: list[str]) -> Any:
    tok_dir = out / "tokenizer"
    if (tok_dir / "tokenizer_config.json").is_file():
        logger.info("using the tokenizer saved in %s (resume)", tok_dir)
        return load_tokenizer(tok_dir)
    if recipe.tokenizer.name is not None:
        return load_tokenizer(Path(recipe.tokenizer.name).expanduser())
    if recipe.model.name is not None and (Path(recipe.model.name) / "tokenizer_config.json").is_file():
        return load_tokenizer(recipe.model.name)
    import tempfile

    t = recipe.tokenizer
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = write_lines(documents, Path(tmp) / "corpus.txt")
        if t.kind == "wordpiece":
            return train_wordpiece_tokenizer(corpus_file, t.vocab_size, min_frequency=t.min_frequency,
                                             model_max_length=recipe.corpus.max_length)
        return train_hybrid_tokenizer(corpus_file, t.vocab_size, word_fraction=t.word_fraction,
                                      min_frequency=t.min_frequency, model_max_length=recipe.corpus.max_length)


def _documents(c: CorpusSection) -> list[str]:
    docs: list[str] = []
    for texts in build_corpus(c.sources).values():
        docs.extend(texts[: c.max_documents] if c.max_documents else texts)
    for f in c.files:
        lines = [ln for ln in Path(f).expanduser().read_text(encoding="utf-8").splitlines() if ln.strip()]
        docs.extend(lines[: c.max_documents] if c.max_documents else lines)
    return docs


def build_rows(tokenizer: Any, documents: list[str], max_length: int, *, seed: int = 0,
               char_level_fraction: float = 0.0) -> PackedRows:
    """Tokenize (with jieba word ids) and pack the documents, in an order shuffled by `seed` so
    that sources mix inside rows and the held-back eval rows come from every source; a
    `char_level_fraction` of them (drawn with `seed`) is fed character by character."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(documents), generator=g).tolist()
    char_level = (torch.rand(len(documents), generator=g) < char_level_fraction).tolist()
    shuffled = [documents[i] for i in order]
    encoded = []
    for start in range(0, len(shuffled), 2048):  # batches: bounded memory, fast Rust calls
        chunk = shuffled[start:start + 2048]
        flags = char_level[start:start + 2048]
        words = jieba_word_ids(tokenizer, [d for d, c in zip(chunk, flags) if not c])
        chars = jieba_word_ids(tokenizer, [d for d, c in zip(chunk, flags) if c], char_level=True)
        it_w, it_c = iter(words), iter(chars)
        encoded.extend(next(it_c) if c else next(it_w) for c in flags)
    return pack_rows(encoded, max_length, cls_token_id=tokenizer.cls_token_id,
                     sep_token_id=tokenizer.sep_token_id)


# --------------------------------------------------------------------------- run


@dataclass
class PretrainResult:
    train: TrainResult
    model_dir: Path
    rows: int
    tokens_per_epoch: int
    parameters: int


def _sinusoidal_positions_(weight: torch.Tensor, std: float) -> None:
    """Fill a (positions, hidden) table with sin/cos waves (Vaswani et al. 2017), scaled to `std`."""
    n, h = weight.shape
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, h, 2, dtype=torch.float32) * (-math.log(10000.0) / h))
    table = torch.zeros(n, h)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: h // 2])
    with torch.no_grad():
        weight.copy_(table * (std / table.std()))


def _model_for(recipe: PretrainRecipe, vocab_size: int, pad_token_id: int) -> ErnieForMaskedLM:
    m = recipe.model
    if m.name is not None and m.init == "pretrained":
        model = ErnieForMaskedLM.from_pretrained(Path(m.name).expanduser(), **m.config)
        if m.layer_map is not None:
            model = grow_layers(model, m.layer_map)
        model.sparse_logits = True
        if model.config.vocab_size != vocab_size:
            raise ConfigError(f"model {m.name} has vocab_size {model.config.vocab_size} but the tokenizer "
                              f"{vocab_size}; pretrain it with its own tokenizer (tokenizer.name={m.name})")
        model.train()
        return model
    if m.name is not None:
        config = ErnieConfig.from_pretrained(Path(m.name).expanduser(), **m.config)
    else:
        config = preset_config(m.preset, **m.config)
    config = config.replace(vocab_size=vocab_size, pad_token_id=pad_token_id)
    model = ErnieForMaskedLM(config, sparse_logits=True)
    if m.position_init == "sinusoidal":
        _sinusoidal_positions_(model.backbone.embeddings.position.weight, config.initializer_range)
    return model


def grow_layers(model: ErnieForMaskedLM, layer_map: Sequence[int]) -> ErnieForMaskedLM:
    """A model with len(layer_map) encoder layers, layer i a copy of `model`'s layer layer_map[i];
    every other weight (embeddings, MLM head) copied as is."""
    n = model.config.num_hidden_layers
    bad = [i for i in layer_map if not 0 <= i < n]
    if bad:
        raise ConfigError(f"layer_map {list(layer_map)} names layers {bad}, but the model has {n} "
                          f"(valid: 0..{n - 1})")
    grown = ErnieForMaskedLM(model.config.replace(num_hidden_layers=len(layer_map)),
                             sparse_logits=model.sparse_logits)
    source = model.backbone.layers
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("backbone.layers.")}
    for i, j in enumerate(layer_map):
        state.update({f"backbone.layers.{i}.{k}": v for k, v in source[j].state_dict().items()})
    grown.load_state_dict(state)  # copies into grown's own parameters: no tensor is shared
    return grown


def pretrain(recipe: PretrainRecipe, *, callbacks: Sequence[Any] = ()) -> PretrainResult:
    """Run (or resume) a pretraining recipe; returns where the model went and the figures."""
    s = recipe.train
    out = Path(s.output_dir)
    documents = _documents(recipe.corpus)
    tok = _tokenizer_for(recipe, out, documents)
    rows = build_rows(tok, documents, recipe.corpus.max_length, seed=s.seed,
                      char_level_fraction=recipe.corpus.char_level_fraction)
    n_eval = min(recipe.corpus.eval_rows, len(rows) // 10)
    train_set = _Subset(rows, range(n_eval, len(rows)))
    eval_set = _Subset(rows, range(n_eval)) if n_eval else None
    logger.info("pretraining on %d rows (%d tokens), %d held back for evaluation",
                len(train_set), rows.num_tokens, n_eval)

    specials = tuple(tok.convert_tokens_to_ids(list(SPECIAL_TOKENS)))
    mk = recipe.masking
    def collator(seed: int) -> WholeWordMaskCollator:
        return WholeWordMaskCollator(mask_token_id=tok.mask_token_id, vocab_size=tok.vocab_size,
                                     special_token_ids=specials, mlm_probability=mk.mlm_probability,
                                     mask_ratio=mk.mask_ratio, random_ratio=mk.random_ratio,
                                     pad_token_id=tok.pad_token_id, seed=seed)

    collate = collator(s.seed)
    eval_collate = collator(s.seed + 1)  # never told the epoch: the same masks at every evaluation

    from accelerate import PartialState

    state = PartialState()
    sampler = _MaskEpochSampler(
        DistributedBatchSampler(len(train_set), s.data.batch_size // state.num_processes * state.num_processes,
                                shuffle=s.data.shuffle, seed=s.seed, num_replicas=state.num_processes,
                                rank=state.process_index, drop_last=s.data.drop_last),
        collate,
    )
    torch.manual_seed(s.seed)  # the same initial weights for the same seed (a resume loads its own)
    model = _model_for(recipe, tok.vocab_size, tok.pad_token_id)
    parameters = sum(p.numel() for p in model.parameters())
    logger.info("model: %s parameters, config %s", f"{parameters:,}", model.config.to_dict())
    files = {"tokenizer": tok, "recipe.yaml": yaml.safe_dump(to_dict(recipe), allow_unicode=True,
                                                          sort_keys=False)}
    trainer = Trainer(model, s, train_dataset=train_set, collate_fn=collate, eval_dataset=eval_set,
                      eval_collate_fn=eval_collate,
                      compute_metrics=_mlm_accuracy if eval_set is not None else None,
                      preprocess_logits=_labelled_predictions,
                      batch_sampler=sampler, run_files=list(files), saved_with_model=(tok,),
                      callbacks=[_WriteRunFiles(files), *callbacks])
    result = trainer.train()
    return PretrainResult(result, result.model_dir, len(rows), rows.num_tokens, parameters)
