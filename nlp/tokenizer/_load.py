"""`load_tokenizer(directory)`: pick the tokenizer class from a directory's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlp._common import UnknownNameError, did_you_mean
from nlp.tokenizer._files import check_dir, read_json
from nlp.tokenizer.base import Tokenizer
from nlp.tokenizer.gazetteer import Gazetteer
from nlp.tokenizer.hybrid import HybridTokenizer
from nlp.tokenizer.unigram import UnigramTokenizer
from nlp.tokenizer.wordpiece import WordPieceTokenizer

__all__ = ["load_tokenizer", "TOKENIZER_CLASSES"]

# tokenizer_config.json "tokenizer_class" -> our class (transformers' and PaddleNLP's names too)
TOKENIZER_CLASSES: dict[str, type[Tokenizer]] = {
    "BertTokenizer": WordPieceTokenizer,
    "BertTokenizerFast": WordPieceTokenizer,
    "ErnieTokenizer": WordPieceTokenizer,
    "ErnieTokenizerFast": WordPieceTokenizer,
    "WordPieceTokenizer": WordPieceTokenizer,
    "HybridTokenizer": HybridTokenizer,
    "XLMRobertaTokenizer": UnigramTokenizer,
    "XLMRobertaTokenizerFast": UnigramTokenizer,
    "UnigramTokenizer": UnigramTokenizer,
}


def load_tokenizer(directory: str | Path, **overrides: Any) -> Tokenizer:
    """Load the tokenizer saved in `directory` (a local path; names go through nlp.AutoTokenizer).

    The class comes from tokenizer_config.json's "tokenizer_class"; without one, a tokenizer.json
    with a unigram model is XLM-R's, and a directory with vocab.txt or a WordPiece tokenizer.json
    is WordPiece (ERNIE/BERT). A `gazetteer` entry attaches the gazetteer.tsv.gz beside them
    (nlp/tokenizer/gazetteer.py).
    """
    path = check_dir(directory)
    config = read_json(path / "tokenizer_config.json")
    name = config.get("tokenizer_class")
    if name is None and (read_json(path / "tokenizer.json").get("model") or {}).get("type") == "Unigram":
        tokenizer: Tokenizer = UnigramTokenizer.from_pretrained(path, **overrides)
    elif name is None:
        tokenizer = WordPieceTokenizer.from_pretrained(path, **overrides)
    elif name not in TOKENIZER_CLASSES:
        raise UnknownNameError(
            f"tokenizer_class {name!r} in {path / 'tokenizer_config.json'} is not supported; "
            f"known: {sorted(TOKENIZER_CLASSES)}.{did_you_mean(name, TOKENIZER_CLASSES)}"
        )
    else:
        tokenizer = TOKENIZER_CLASSES[name].from_pretrained(path, **overrides)
    if config.get("gazetteer") is not None:
        tokenizer.gazetteer = Gazetteer.load(path, config["gazetteer"])
    return tokenizer
