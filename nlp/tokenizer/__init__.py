"""nlp.tokenizer: ERNIE/BERT WordPiece, XLM-R unigram and jieba+BPE hybrid tokenizers, training, collators.

Both tokenizers share one base class and transformers' BertTokenizerFast call signature::

    from nlp.tokenizer import load_tokenizer, train_hybrid_tokenizer
    tok = load_tokenizer("path/to/ernie")          # WordPiece or hybrid, from tokenizer_config.json
    enc = tok(["这家餐厅的服务非常好"], return_offsets_mapping=True)
"""

# ---- tokenizers (owned by the tokenizer helper) ----
from nlp.tokenizer._load import TOKENIZER_CLASSES, load_tokenizer
from nlp.tokenizer.base import BatchEncoding, Tokenizer
from nlp.tokenizer.gazetteer import Gazetteer
from nlp.tokenizer.hybrid import HybridTokenizer
from nlp.tokenizer.segmenter import JiebaSegmenter
from nlp.tokenizer.training import train_hybrid_tokenizer, train_wordpiece_tokenizer
from nlp.tokenizer.wordpiece import WordPieceTokenizer
from nlp.tokenizer.unigram import UnigramTokenizer, build_unigram_backend

__all__ = [
    "Tokenizer",
    "BatchEncoding",
    "Gazetteer",
    "WordPieceTokenizer",
    "HybridTokenizer",
    "UnigramTokenizer",
    "build_unigram_backend",
    "JiebaSegmenter",
    "train_hybrid_tokenizer",
    "train_wordpiece_tokenizer",
    "load_tokenizer",
    "TOKENIZER_CLASSES",
]

# ---- collators and samplers (owned by the collator helper; add imports and names here) ----
from nlp.tokenizer.collate import (  # noqa: E402
    DEFAULT_DROP_KEYS,
    DataCollatorWithPadding,
    PackingCollator,
    pack_ids_to_cu_seqlens,
)
from nlp.tokenizer.samplers import (  # noqa: E402
    DistributedBatchSampler,
    LengthGroupedBatchSampler,
    PackedBatchSampler,
    plan_packing,
)

__all__ += [
    "DataCollatorWithPadding",
    "PackingCollator",
    "pack_ids_to_cu_seqlens",
    "DEFAULT_DROP_KEYS",
    "DistributedBatchSampler",
    "LengthGroupedBatchSampler",
    "PackedBatchSampler",
    "plan_packing",
]

from nlp.tokenizer.masking import WholeWordMaskCollator, jieba_word_ids, pack_rows  # noqa: E402

__all__ += ["WholeWordMaskCollator", "jieba_word_ids", "pack_rows"]
