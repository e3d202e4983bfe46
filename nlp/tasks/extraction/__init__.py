"""Information extraction (UIE): a schema of entity types and their roles given at call time,
spans with character offsets into the text (Taskflow's `information_extraction`).

The model: the zoo's encoder (ERNIE/BERT, loaded as every model of `nlp.models`) reading
`[CLS] prompt [SEP] text [SEP]`, and two pointer heads at the top level of the state dict,
PaddleNLP's names (heads.py has the full key list):

    ernie.embeddings.* / ernie.encoder.layer.N.*           (bert.* on a BERT encoder; no pooler)
    linear_start.weight (1, H)  linear_start.bias (1,)     sigmoid per token: a span starts here
    linear_end.weight   (1, H)  linear_end.bias   (1,)     sigmoid per token: a span ends here

A model directory: config.json (`"architectures": ["ErnieForInformationExtraction"]`,
`model_type` and the encoder's transformers fields), model.safetensors, the tokenizer files.
"""

from nlp.tasks.extraction.heads import ErnieForInformationExtraction, InformationExtractionOutput
from nlp.tasks.extraction.schema import SchemaError, SchemaNode, parse_schema

__all__ = ["ErnieForInformationExtraction", "InformationExtractionOutput", "SchemaError", "SchemaNode",
           "parse_schema"]
