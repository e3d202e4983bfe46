"""The lexical-analysis head: the token-classification head (nlp/tasks/ner/heads.py) over the
word-boundary x POS tags, under its own architecture name.

The layers and parameter names are `ErnieForTokenClassification`'s (backbone, dropout,
`classifier`, the optional `crf`), so transformers' `ErnieForTokenClassification` loads a saved
lexical model and gives the same logits; only config.json's ``architectures`` entry,
``ErnieForLexicalAnalysis``, differs, which is how `nlp evaluate` / `predict` / `export` / `serve`
tell a lexical model from an NER one. Decoding (`decode`) is the NER head's: Viterbi with the CRF,
else the most probable well-formed tag sequence (the B/I/E/S x POS tags are a BIOES tag set).
"""

from __future__ import annotations

from nlp.tasks.ner.heads import ErnieForTokenClassification, TokenClassifierOutput

__all__ = ["ErnieForLexicalAnalysis", "TokenClassifierOutput"]


class ErnieForLexicalAnalysis(ErnieForTokenClassification):
    """Backbone (no pooler) + dropout + `classifier` (H -> B/I/E/S x POS tags) [+ `crf`]."""

    _HF_SUFFIX = "ForLexicalAnalysis"
