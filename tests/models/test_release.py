"""Release copies (nlp.models.release): the one fp16 writer behind `release_pretrained` (pretraining) and
`nlp hub ship` (fine-tuned models)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from safetensors.torch import load_file

import nlp
from nlp.models import ErnieForMaskedLM
from nlp.models.release import TOKENIZER_FILES, file_digests, write_release_copy
from nlp.ship import release_pretrained

ASSET = Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh"


def test_export_model_writes_fp16_weights_tokenizer_and_digests(tmp_path):
    out = release_pretrained(ASSET, tmp_path / "release")
    files = {p.name for p in (tmp_path / "release").iterdir()}
    assert files == {"config.json", "model.safetensors", *(n for n in TOKENIZER_FILES if (ASSET / n).is_file())}
    assert out == file_digests(tmp_path / "release")
    for name, d in out.items():
        data = (tmp_path / "release" / name).read_bytes()
        assert d == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    weights = load_file(tmp_path / "release" / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.float16}
    # the shipped weights are fp16 already: a release copy of them is the same tensors
    shipped = load_file(ASSET / "model.safetensors")
    assert weights.keys() == shipped.keys() and all(torch.equal(weights[k], shipped[k]) for k in shipped)


def test_write_release_copy_leaves_the_model_in_its_dtype(tmp_path):
    model = ErnieForMaskedLM.from_pretrained(ASSET)
    write_release_copy(model, ASSET, tmp_path, dtype=torch.float16)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    again = ErnieForMaskedLM.from_pretrained(tmp_path)
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        torch.testing.assert_close(a, b, msg=k)  # fp16 on disk, exactly the fp16-valued weights
