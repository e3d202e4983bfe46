"""What a shipped task model costs in package data, and what int8 or one shared backbone would save.

    python benchmarks/package_size.py                       # the shape of nlp/assets/ernie-tiny-zh
    python benchmarks/package_size.py --config DIR_OR_JSON  # another shape (e.g. a v4 candidate)

For a sentiment head (2 labels) and a NER head (7 BIO tags) on the given backbone shape, with
random weights (sizes do not depend on the values): the fp16 safetensors file that
`nlp hub ship` writes, the fp32 and int8 ONNX files that `nlp export` / `nlp export --quantize
int8` write, and the parameter counts of backbone and head. The figures are quoted in
docs/hub.md ("Package data: sizes").
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import torch

import nlp
from nlp.deploy import export_model
from nlp.models import ErnieConfig, ErnieForMaskedLM
from nlp.models.release import TOKENIZER_FILES, write_release_copy
from nlp.tasks import ErnieForSequenceClassification, ErnieForTokenClassification

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"
MB = 2**20


def _files_size(directory: Path, suffixes: tuple[str, ...]) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and p.suffix in suffixes)


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ASSET), help="a model directory or config.json (default: ernie-tiny-zh)")
    args = ap.parse_args()
    config_path = Path(args.config)
    config = ErnieConfig.from_pretrained(config_path if config_path.is_dir() else config_path.parent)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, cls, labels in (("sentiment (2 labels)", ErnieForSequenceClassification, ["negative", "positive"]),
                                  ("NER (7 BIO tags)", ErnieForTokenClassification,
                                   ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"])):
            torch.manual_seed(0)
            model = cls(config.replace(id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)}))
            src = tmp / cls.__name__ / "fp32"
            model.save_pretrained(src)
            for f in TOKENIZER_FILES:
                if (ASSET / f).is_file():
                    shutil.copyfile(ASSET / f, src / f)
            write_release_copy(model, src, tmp / cls.__name__ / "fp16")
            onnx32 = export_model(src, tmp / cls.__name__ / "onnx-fp32").out
            onnx8 = export_model(src, tmp / cls.__name__ / "onnx-int8", quantize="int8").out
            head = _params(model) - _params(model.backbone)
            rows.append({
                "model": name,
                "fp32 safetensors MB": (src / "model.safetensors").stat().st_size / MB,
                "fp16 safetensors MB": (tmp / cls.__name__ / "fp16" / "model.safetensors").stat().st_size / MB,
                "fp32 onnx MB": _files_size(onnx32, (".onnx", ".data")) / MB,
                "int8 onnx MB": _files_size(onnx8, (".onnx", ".data")) / MB,
                "backbone params": _params(model.backbone), "head params": head,
            })
    mlm = ErnieForMaskedLM(config)
    print(json.dumps({"config": str(config_path), "hidden_size": config.hidden_size,
                      "layers": config.num_hidden_layers, "vocab_size": config.vocab_size,
                      "masked-lm params": _params(mlm), "masked-lm backbone params": _params(mlm.backbone),
                      "task models": rows}, indent=2))


if __name__ == "__main__":
    main()
