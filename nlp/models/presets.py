"""The model zoo's architectures: preset name -> ErnieConfig kwargs, with the source of each.

Data only. The ERNIE rows copy PaddleNLP's `paddlenlp/transformers/ernie/configuration.py`
(`ERNIE_PRETRAINED_INIT_CONFIGURATION`), where a key a row leaves out takes PaddleNLP's
ErnieConfig default: intermediate_size 3072, task_type_vocab_size 3, pad_token_id 0,
layer_norm_eps 1e-12 (and use_task_id True, which the ERNIE 1.0 checkpoint does not carry: it has
no task-type embedding, so the row says False). The BERT rows copy the config.json of the Hugging
Face cards.

LayerNorm eps: PaddleNLP 2.8's ErnieModel builds every LayerNorm with the config's layer_norm_eps,
1e-12 for all ERNIE rows below; a model saved by paddlenlp 2.8.1 matches a transformers ErnieModel
with eps 1e-12 to 1e-6 and differs by 3e-4 with 1e-5. The torch ports on the HF hub
(nghuyong/ernie-3.0-*) declare 1e-5, which is not what the weights were trained with, so the
presets keep 1e-12. The Chinese BERT cards declare 1e-12 (Google BERT's value), kept as well.
"""

from __future__ import annotations

from typing import Any

from nlp._common import UnknownNameError, did_you_mean

from .config import ErnieConfig

__all__ = ["PRESETS", "preset_config", "PRESET_METADATA_KEYS"]

_PADDLE = "https://github.com/PaddlePaddle/PaddleNLP/blob/develop/paddlenlp/transformers/ernie/configuration.py"
_HF = "https://huggingface.co/{}/blob/main/config.json"

# Keys of a PRESETS row that describe where it comes from rather than the architecture.
PRESET_METADATA_KEYS = ("source",)

_DROPOUT = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}

# ERNIE 3.0 rows share everything but the sizes; PaddleNLP writes each out, we factor it.
_ERNIE3 = {
    "model_type": "ernie", "hidden_act": "gelu", **_DROPOUT, "initializer_range": 0.02,
    "max_position_embeddings": 2048, "type_vocab_size": 4, "vocab_size": 40000,
    "pad_token_id": 0,
    "layer_norm_eps": 1e-12,  # Paddle's value; HF torch ports say 1e-5 (see module docstring)
}

_BERT_ZH = {
    "model_type": "bert", "hidden_act": "gelu", **_DROPOUT, "initializer_range": 0.02,
    "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 21128,
    "pad_token_id": 0, "layer_norm_eps": 1e-12,
}
_XLMR = {
    "model_type": "xlm-roberta", "hidden_act": "gelu", **_DROPOUT, "initializer_range": 0.02,
    "max_position_embeddings": 514, "type_vocab_size": 1, "vocab_size": 250002,
    "pad_token_id": 1, "layer_norm_eps": 1e-5,
}
_MINILM_XLMR = {
    "model_type": "bert", "hidden_act": "gelu", **_DROPOUT, "initializer_range": 0.02,
    "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 250037,
    "pad_token_id": 0, "layer_norm_eps": 1e-12,
    "hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 1536,
}
_BERT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
              "intermediate_size": 3072}
_BERT_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
               "intermediate_size": 4096}


def _ernie3(h: int, layers: int, heads: int, inter: int, task_vocab: int, use_task_id: bool) -> dict:
    return {**_ERNIE3, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
            "intermediate_size": inter, "task_type_vocab_size": task_vocab,
            "use_task_id": use_task_id, "source": _PADDLE}


PRESETS: dict[str, dict[str, Any]] = {
    # ERNIE 1.0: ReLU, 18000-token vocab, 513 positions, no task-type embedding.
    "ernie-1.0-base-zh": {
        "model_type": "ernie", "hidden_act": "relu", **_DROPOUT, "initializer_range": 0.02,
        "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 513, "type_vocab_size": 2,
        "vocab_size": 18000, "pad_token_id": 0, "task_type_vocab_size": 3,
        "use_task_id": False, "layer_norm_eps": 1e-12, "source": _PADDLE,
    },
    # ERNIE 3.0 (use_task_id True; base has 3 task types, the distilled ones 16).
    "ernie-3.0-xbase-zh": _ernie3(1024, 20, 16, 4096, 16, True),  # intermediate 4096
    "ernie-3.0-base-zh": _ernie3(768, 12, 12, 3072, 3, True),
    "ernie-3.0-medium-zh": _ernie3(768, 6, 12, 3072, 16, True),
    "ernie-3.0-mini-zh": _ernie3(384, 6, 12, 1536, 16, True),
    "ernie-3.0-micro-zh": _ernie3(384, 4, 12, 1536, 16, True),
    "ernie-3.0-nano-zh": _ernie3(312, 4, 12, 1248, 16, True),
    # ERNIE 3.0 Tiny v2: same sizes, but trained without the task-type embedding.
    "ernie-3.0-tiny-base-v2-zh": _ernie3(768, 12, 12, 3072, 3, False),
    "ernie-3.0-tiny-medium-v2-zh": _ernie3(768, 6, 12, 3072, 16, False),
    "ernie-3.0-tiny-mini-v2-zh": _ernie3(384, 6, 12, 1536, 16, False),
    "ernie-3.0-tiny-micro-v2-zh": _ernie3(384, 4, 12, 1536, 16, False),
    "ernie-3.0-tiny-nano-v2-zh": _ernie3(312, 4, 12, 1248, 16, False),
    "ernie-3.0-tiny-pico-v2-zh": _ernie3(128, 3, 2, 512, 16, False),  # 2 heads of 64
    # Chinese BERT family (BERT architecture: no task-type embedding, 2 token types).
    "bert-base-chinese": {**_BERT_ZH, **_BERT_BASE,
                          "source": _HF.format("google-bert/bert-base-chinese")},
    "chinese-roberta-wwm-ext": {**_BERT_ZH, **_BERT_BASE,
                                "source": _HF.format("hfl/chinese-roberta-wwm-ext")},
    "chinese-roberta-wwm-ext-large": {**_BERT_ZH, **_BERT_LARGE,
                                      "source": _HF.format("hfl/chinese-roberta-wwm-ext-large")},
    "chinese-macbert-base": {**_BERT_ZH, **_BERT_BASE,
                             "source": _HF.format("hfl/chinese-macbert-base")},
    "chinese-macbert-large": {**_BERT_ZH, **_BERT_LARGE,
                              "source": _HF.format("hfl/chinese-macbert-large")},
    # RBT3: the first 3 layers of RoBERTa-wwm-ext, base width.
    "rbt3": {**_BERT_ZH, **_BERT_BASE, "num_hidden_layers": 3, "source": _HF.format("hfl/rbt3")},
    # The XLM-R tokenizer family (250,002 SentencePiece pieces). e5-small and the MiniLM are BERT
    # architectures (positions from 0, two token types) with XLM-R's tokenizer; their embedding
    # has 250,037 rows, 35 more than the tokenizer has pieces, as the Multilingual-MiniLM they
    # come from. e5-base/large and bge-m3 are XLM-R (positions from pad + 1, one token type).
    "multilingual-e5-small": {**_MINILM_XLMR, "source": _HF.format("intfloat/multilingual-e5-small")},
    "paraphrase-multilingual-MiniLM-L12-v2": {
        **_MINILM_XLMR, "source": _HF.format("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2")},
    "multilingual-e5-base": {**_XLMR, **_BERT_BASE, "source": _HF.format("intfloat/multilingual-e5-base")},
    "multilingual-e5-large": {**_XLMR, **_BERT_LARGE, "source": _HF.format("intfloat/multilingual-e5-large")},
    "bge-m3": {**_XLMR, **_BERT_LARGE, "max_position_embeddings": 8194,  # 8,192 tokens
               "source": _HF.format("BAAI/bge-m3")},
}


def preset_config(name: str, **overrides: Any) -> ErnieConfig:
    """The ErnieConfig of a preset, e.g. `preset_config("ernie-3.0-mini-zh", num_labels=3)`."""
    if name not in PRESETS:
        raise UnknownNameError(
            f"Unknown preset {name!r}.{did_you_mean(name, PRESETS)} "
            f"Known presets: {', '.join(sorted(PRESETS))}"
        )
    kwargs = {k: v for k, v in PRESETS[name].items() if k not in PRESET_METADATA_KEYS}
    return ErnieConfig.from_dict(kwargs, **overrides)
