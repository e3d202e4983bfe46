"""The token classification task (NER): tags per word, scored by entity."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

import torch

from nlp._common import DataError
from nlp._extras import LazyModule
from nlp._settings import Problem
from nlp.tasks.ner.data import read_conll, read_paddle_ner
from nlp.tasks.ner.gazetteer import prepare_gazetteer
from nlp.tasks.ner.pipeline import TokenClassificationPipeline
from nlp.tasks.ner.crf import crf_scores
from nlp.tasks.ner.heads import ErnieForTokenClassification, decode_tags
from nlp.tasks.ner.metrics import ner_metrics
from nlp.tasks.ner.postprocess import tags_to_entities
from nlp.tasks.ner.preprocess import preprocess_ner, visible_characters
from nlp.tasks.ner.tags import detect_scheme, get_entities, tags_from_spans
from nlp.tasks.ner.serving import TokenClassificationAdapter
from nlp.tasks.spec import TaskSettings, TaskSpec
from nlp.tokenizer.gazetteer import gazetteer_name_problem

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["TokenClassificationSpec", "TokenClassificationSettings", "TOKEN_CLASSIFICATION"]


@dataclass
class TokenClassificationSettings(TaskSettings):
    """The recipe's task section for NER (formerly data.label_all_tokens / data.long_sentences)."""

    name: str = "token-classification"
    label_all_tokens: bool = False  # label every sub-token of a word, not only the first
    # a sentence over data.max_length tokens is split into pieces (every word kept and scored)
    # or truncated (its tail neither trained on nor scored)
    long_sentences: Literal["split", "truncate"] = "split"
    # a CRF layer over the tags (Viterbi decoding); None: as the model's config says
    # (model.config.use_crf, false for a new head)
    use_crf: bool | None = None
    # typed words (names) whose matches in the text become the tokens' type ids, a feature the
    # model learns (nlp/tokenizer/gazetteer.py): `jieba` (its dictionary, PER/LOC/ORG/WORD) or a
    # file of word<TAB>TYPE lines; saved with the model's tokenizer. None: as the model has it
    gazetteer: str | None = None
    # add the training split's entities (2+ characters) to the gazetteer as types of their own;
    # each training row sees only the other folds' entities (nlp/tasks/ner/gazetteer.py says why)
    gazetteer_train_entities: bool = False

    def problems(self) -> Iterator[Problem]:
        problem = gazetteer_name_problem(self.gazetteer)
        if problem:
            yield Problem("gazetteer", problem)


class TokenClassificationSpec(TaskSpec):
    name = "token-classification"
    aliases = ("ner",)
    head = ErnieForTokenClassification
    default_model = "ernie-tiny-zh-ner"  # PER / LOC / ORG, BIO, on zh-ner: recipes/ner-zh.yaml distilled (its card)
    pipeline_class = TokenClassificationPipeline
    architecture_suffix = "ForTokenClassification"
    label_column = "ner_tags"
    export_outputs = {"logits": ("batch", "sequence", "num_labels")}
    distill_losses = {"logits": "softmax"}  # per-token tag emissions: a distribution over the tags
    result_field = "entities"
    settings = TokenClassificationSettings
    data_keys_moved = ("label_all_tokens", "long_sentences")  # data.label_all_tokens & co. in older recipes
    serving = TokenClassificationAdapter()
    reader = staticmethod(read_conll)
    preprocess = staticmethod(preprocess_ner)
    metric = staticmethod(ner_metrics)
    postprocess = staticmethod(tags_to_entities)
    training_format = ("CoNLL: a character and its BIO tag a line (京<TAB>B-LOC), a blank line after each "
                       "text; white space left out, as the tokenizer leaves it out")

    def serving_routes(self) -> dict[str, Any]:
        # POST /: the endpoint root huggingface_hub's InferenceClient.token_classification posts to;
        # /predict's body and answer are already the Inference API's (entity_group, word, start, end)
        return {"/predict": self.serving, "/": self.serving}

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> datasets.Dataset:
        # Both formats carry a tag per token: every NER file is labelled.
        kwargs = dict(data.reader)
        fmt = kwargs.pop("format", "conll")
        if data.label_names is not None:
            kwargs.setdefault("label_names", data.label_names)
            # a BIO file read with BIOES label names (a teacher's lines joining a BIOES split)
            # would otherwise keep B-/I- where the label set means S-/E-
            kwargs.setdefault("to_scheme", detect_scheme(data.label_names))
        return read_paddle_ner(path, **kwargs) if fmt == "paddle" else read_conll(path, **kwargs)

    def label_names(self, ds: datasets.Dataset) -> list[str]:
        return list(ds.features["ner_tags"].feature.names)

    def summarize(self, ds: datasets.Dataset) -> list[str]:
        names = self.label_names(ds)
        ents = Counter(t for row in ds["ner_tags"] for t, _, _ in get_entities([names[i] for i in row]))
        return ([f"{len(ds)} sentences, {sum(map(len, ds['tokens']))} tokens"]
                + [f"  {type_}: {n} entities" for type_, n in sorted(ents.items())])

    def training_texts(self, ds: datasets.Dataset) -> list[str]:
        return ["".join(t) for t in ds["tokens"]]

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        settings = self.task_settings(settings)
        return preprocess_ner(columns, tokenizer, max_length=data.max_length, label_names=label_names,
                              label_all_tokens=settings.label_all_tokens, long_sentences=settings.long_sentences)

    def prepare_tokenizer(self, tokenizer: Any, train: Any, label_names: Sequence[str] | None,
                          settings: Any = None) -> Iterator[tuple[range, Any]] | None:
        return prepare_gazetteer(tokenizer, train, label_names, self.task_settings(settings), self.label_column)

    def head_config(self, label_names: list[str] | None, train: Any = None, settings: Any = None) -> dict[str, Any]:
        out = super().head_config(label_names, train)
        use_crf = self.task_settings(settings).use_crf
        return out if use_crf is None else {**out, "use_crf": use_crf}

    def keep_logits(self, model: Any, outputs: Any, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        # Decoded tag ids where a tag is scored (first sub-token of a word), -100 elsewhere;
        # with a CRF this is the Viterbi path, which argmax over logits is not.
        logits = outputs.logits
        mask = batch["labels"] != -100 if "labels" in batch else batch["attention_mask"].bool()
        paths = decode_tags(logits, mask, model.config.id2label, crf=crf_scores(model.decoding_tensors()))
        out = torch.full(mask.shape, -100, dtype=torch.long, device=logits.device)
        for i, path in enumerate(paths):
            out[i, mask[i]] = torch.tensor(path, dtype=torch.long, device=logits.device)
        return out

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any], *, label_names: list[str] | None,
              examples: Any, features: Any, data: Any, settings: Any = None) -> dict[str, float]:
        names = label_names or []
        gold, guess = [], []
        for p, g in zip(predictions, label_ids):
            keep = g != -100
            gold.append([names[i] for i in g[keep]])
            guess.append([names[i] if 0 <= i < len(names) else "O" for i in p[keep]])
        m = ner_metrics(gold, guess)
        out = {"precision": m["precision"], "recall": m["recall"], "f1": m["f1"]}
        for type_, per in sorted(m["per_type"].items()):  # "f1/ORG": extraction's names for a type's scores
            out.update({f"precision/{type_}": per["precision"], f"recall/{type_}": per["recall"],
                        f"f1/{type_}": per["f1"]})
        return out

    def loss_units(self, model: Any) -> Callable[[Any], int] | None:
        # a CRF's loss is a mean over sequences, not over labelled tokens
        return _sequences_in if getattr(model, "crf", None) is not None else None

    def empty_prediction(self) -> dict[str, Any]:
        return {"entities": []}

    def training_line(self, result: dict[str, Any]) -> str:
        # one line per character the pipeline fed the model (`visible_characters`: white space
        # left out, which a token column split on white space could not hold either), the
        # text's block ending in a blank line
        text, entities = result["text"], result[self.result_field]
        offsets, chars = visible_characters(text)
        position = {offset: k for k, offset in enumerate(offsets)}
        taken = [False] * len(text)  # overlaps are checked on the text, white space included
        spans = []
        for e in entities:
            start, end, type_ = e["start"], e["end"], e["type"]
            where = f"entity {e.get('text')!r} at [{start}, {end})"
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
                raise DataError(f"{where} is outside the text of {len(text)} characters")
            if not isinstance(type_, str) or not type_ or any(c.isspace() for c in type_):
                raise DataError(f"{where} has type {type_!r}, which a tag column cannot hold")
            if any(taken[start:end]):
                raise DataError(f"{where} overlaps another entity")
            taken[start:end] = [True] * (end - start)
            kept = [position[i] for i in range(start, end) if i in position]
            if not kept:
                raise DataError(f"{where} holds only white space")
            spans.append((type_, kept[0], kept[-1]))
        tags = tags_from_spans(spans, len(chars), "BIO")
        return "".join(f"{char}\t{tag}\n" for char, tag in zip(chars, tags))


TOKEN_CLASSIFICATION = TokenClassificationSpec()


def _sequences_in(batch: Any) -> int:
    return len(batch["labels"])
