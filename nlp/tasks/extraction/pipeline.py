"""The information extraction pipeline (UIE): a schema at call time, spans with character offsets.

    ie = nlp.pipeline("information-extraction", model="uie_out/", schema=["时间", "选手", {"竞赛名称": ["主办方"]}])
    ie("2月8日上午北京冬奥会自由式滑雪女子大跳台决赛中中国选手谷爱凌以188.25分获得金牌！")
    # [{"时间": [{"text": "2月8日上午", "start": 0, "end": 6, "probability": 0.98}], "选手": [...],
    #   "竞赛名称": [{"text": ..., "relations": {"主办方": [...]}}]}]

Taskflow's output shape: a list per call with one dict per text, {type: [span, ...]}, types with
nothing found left out; a span is {"text", "start", "end", "probability"} (offsets into the text
given, end exclusive) and, when its type has roles in the schema and some were found,
"relations": {role: [span, ...]}. A str input gives that list with its one dict, as Taskflow does.

Speed with many types: every prompt of a schema level, for every text and every window, is one
row of one pool that runs shortest first, `batch_size` rows per forward call; the texts are
tokenized once per call whatever the number of prompts. The roles of the next level are asked
once the level above has its spans, in one pool again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from nlp._common import ConfigError
from nlp.tasks.base_pipeline import Pipeline, as_batch, check_unicode
from nlp.tasks.extraction.decode import merge_spans, row_spans
from nlp.tasks.extraction.heads import ErnieForInformationExtraction
from nlp.tasks.extraction.preprocess import build_rows, encode_prompts, encode_texts
from nlp.tasks.extraction.schema import SchemaNode, chained_prompt, parse_schema

__all__ = ["InformationExtractionPipeline", "DEFAULT_POSITION_PROB", "DEFAULT_DOC_STRIDE"]

DEFAULT_POSITION_PROB = 0.5  # Taskflow's default: a pointer counts above this probability
DEFAULT_DOC_STRIDE = 32  # tokens shared by consecutive windows: the longest span a cut cannot hide


def _check_prob(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ConfigError(f"position_prob must be a number in [0, 1), got {value!r}")
    return float(value)


class InformationExtractionPipeline(Pipeline):
    """Spans per schema type (and role) with character offsets and probabilities."""

    task = "information-extraction"
    head_class = ErnieForInformationExtraction

    def __init__(self, model: Any, tokenizer: Any = None, *, schema: Any = None,
                 position_prob: float = DEFAULT_POSITION_PROB, doc_stride: int = DEFAULT_DOC_STRIDE,
                 **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        self.schema = None if schema is None else parse_schema(schema)
        self.position_prob = _check_prob(position_prob)
        if isinstance(doc_stride, bool) or not isinstance(doc_stride, int) or doc_stride < 0:
            raise ConfigError(f"doc_stride must be an int >= 0, got {doc_stride!r}")
        self.doc_stride = doc_stride

    def set_schema(self, schema: Any) -> None:
        """The schema calls use when they give none (Taskflow's `set_schema`)."""
        self.schema = parse_schema(schema)

    def _row(self, out: dict[str, np.ndarray], j: int, length: int) -> Any:
        return out["start_prob"][j, :length], out["end_prob"][j, :length]

    def extract(self, pairs: Sequence[tuple[str, str]], position_prob: float) -> list[list[tuple[int, int, float]]]:
        """(char start, char end, probability) spans for each (prompt, text) pair, every pair's
        windows in one pool of rows."""
        prompts = list(dict.fromkeys(p for p, _ in pairs))
        texts = list(dict.fromkeys(t for _, t in pairs))
        p_index = {p: i for i, p in enumerate(prompts)}
        t_index = {t: i for i, t in enumerate(texts)}
        rows = build_rows(self.tokenizer, encode_prompts(self.tokenizer, prompts, self.max_length),
                          encode_texts(self.tokenizer, texts), [(p_index[p], t_index[t]) for p, t in pairs],
                          self.max_length, self.doc_stride)
        outs = self._forward([r.features() for r in rows]) if rows else []
        found: list[list[tuple[int, int, float]]] = [[] for _ in pairs]
        for row, (start, end) in zip(rows, outs):
            found[row.pair].extend(row_spans(start, end, row.offsets, position_prob))
        return [merge_spans(f) for f in found]

    def __call__(self, inputs: str | Sequence[str], *, schema: Any = None,
                 position_prob: float | None = None) -> list[dict[str, Any]]:
        """One dict per text, {type: [{"text", "start", "end", "probability"[, "relations"]}]}."""
        texts, single = as_batch(inputs, "inputs")
        check_unicode(texts, "inputs", single)
        nodes = parse_schema(schema) if schema is not None else self.schema
        if nodes is None:
            raise ConfigError("no schema: give schema= to nlp.pipeline(...) or to the call, e.g. "
                              "schema=['人物', '地点', {'组织机构': ['成立时间']}]")
        threshold = self.position_prob if position_prob is None else _check_prob(position_prob)
        results: list[dict[str, Any]] = [{} for _ in texts]
        # a job: (text index, prompt, its schema node, where its spans go)
        jobs: list[tuple[int, str, SchemaNode, Callable[[str, list], None]]] = [
            (i, node.name, node, results[i].__setitem__) for i in range(len(texts)) for node in nodes]
        while jobs:
            spans = self.extract([(prompt, texts[i]) for i, prompt, _, _ in jobs], threshold)
            next_jobs = []
            for (i, _, node, put), found in zip(jobs, spans):
                if not found:
                    continue
                items = [{"text": texts[i][s:e], "start": s, "end": e, "probability": p} for s, e, p in found]
                put(node.name, items)
                for item in items:
                    for child in node.children:
                        next_jobs.append((i, chained_prompt(item["text"], child.name), child, _relations_of(item)))
            jobs = next_jobs
        return results


def _relations_of(item: dict[str, Any]) -> Callable[[str, list], None]:
    """Where a role's spans go: the parent span's "relations", made when the first is found."""
    def put(name: str, spans: list) -> None:
        item.setdefault("relations", {})[name] = spans
    return put
