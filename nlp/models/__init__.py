"""nlp.models: the ERNIE / Chinese-BERT encoder family, its configs, presets and checkpoint I/O.

Models load from a local transformers-format directory (`config.json` + `model.safetensors`);
finding and downloading one is the hub's job (nlp.hub, glued in nlp.auto).
"""

from ._modeling import EncoderOutput, MaskedLMOutput, PreTrainedEncoder, WeightsFileError, select_layers
from .config import ErnieConfig
from .dropout import Dropout
from .ernie import ErnieForMaskedLM, ErnieModel
from .presets import PRESETS, preset_config
from .hardware import cpu_bf16_flags, cpu_has_fast_bf16
from .precision import PRECISION_DTYPES, declared_precision, precision_of, prepare_for_inference, resolve_precision
from ._linear import ONEDNN_SERVING_CACHE_ENTRIES, limit_onednn_cache
from .fast_paths import bucket_gemm_rows
from ._pdparams import UnsafePickleError, load_pdparams
from .convert_paddle import convert_paddle_checkpoint

__all__ = [
    "ErnieConfig",
    "PreTrainedEncoder",
    "select_layers",
    "ErnieModel",
    "ErnieForMaskedLM",
    "EncoderOutput",
    "MaskedLMOutput",
    "WeightsFileError",
    "Dropout",
    "PRESETS",
    "preset_config",
    "cpu_bf16_flags",
    "cpu_has_fast_bf16",
    "PRECISION_DTYPES",
    "declared_precision",
    "precision_of",
    "prepare_for_inference",
    "resolve_precision",
    "limit_onednn_cache",
    "ONEDNN_SERVING_CACHE_ENTRIES",
    "bucket_gemm_rows",
    # --- PaddleNLP converter ---
    "convert_paddle_checkpoint",
    "load_pdparams",
    "UnsafePickleError",
]
