"""Sentence embedding head: backbone -> mean or [CLS] pooling, trained contrastively.

The model has no parameters of its own beyond the backbone, so a saved directory is a plain
ERNIE/BERT model directory (`ernie.*` keys) that transformers' `AutoModel` loads; the pooling
mode travels in config.json (`pooling`: "mean" or "cls"), and `save_pretrained` also writes
sentence-transformers' layout (`modules.json`, `1_Pooling/config.json`, `2_Normalize`) so the
directory loads there too when its tokenizer is a WordPiece one.

Inputs are (B, T) texts, or (B, K, T): K texts per example, as the task's features give them:

- K >= 2, no labels: a query, its positive, and optional hard negatives. The loss is InfoNCE
  with in-batch negatives at temperature `contrastive_temperature` (config.json, default 0.05):
  query i against every positive and negative of the batch, the right answer being its own
  positive. In data-parallel training the candidates of every process are gathered (with their
  gradients), so the negative pool is the global batch and the loss equals one process's on
  the whole batch.
- K == 2 with float `labels` (scored pairs, STS): CoSENT, the ranking loss on the pairs'
  cosines (a pair scored higher must have the larger cosine).
- K == 1 in training: unsupervised SimCSE. Each text is encoded twice in one pass; the two
  dropout masks are the augmentation, and the two views are each other's positive.

`sentence_embedding` is the pooled vector, not normalised (the pipelines and the losses
normalise; averaging the windows of a long text happens before that).

Lexical weights (config.json `lexical_weights: true`; BGE-M3's sparse retrieval): one linear
layer maps each token's last hidden state to a weight, relu(w . h + b); a text's sparse vector
holds, per vocabulary id, the largest weight of that id's tokens ([CLS], [SEP] and padding weigh
0). Two texts' lexical score is the dot product of their sparse vectors (the weights of the
tokens they share), and their hybrid score is cosine + lexical score. Training on retrieval
data then adds InfoNCE on the lexical scores and on the hybrid scores to the dense loss (the
mean of the three), so exact matches of rare names, which a small model's mean-pooled vector
blurs, count again. The layer is saved as `lexical_linear.*` (transformers' `AutoModel`
ignores it and still loads the backbone).

Bigram weights (config.json `lexical_bigrams: true`, with lexical weights): a second linear
layer weighs each pair of adjacent tokens from their two hidden states, relu(w . [h_t; h_t+1] +
b), and the pair joins the sparse vector under its own key (metrics.bigram_keys), so a
character model matches words and names as units, as a character-bigram BM25 does. Position t
of `bigram_weights` is the pair (t, t + 1); a pair with [CLS], [SEP] or padding weighs 0. Saved
as `bigram_linear.*`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from nlp._common import ConfigError, DataError, atomic_write
from nlp.models import ErnieConfig, ErnieModel, PreTrainedEncoder
from nlp.tasks.embedding.metrics import bigram_keys

__all__ = ["ErnieForSentenceEmbedding", "SentenceEmbeddingOutput", "POOLING_MODES", "info_nce", "cosent",
           "lexical_terms", "shared_sparse_vectors", "hybrid_info_nce"]

POOLING_MODES = ("mean", "cls")
DEFAULT_TEMPERATURE = 0.05  # SimCSE's and bge's value: sharp enough that hard negatives matter
_COSENT_SCALE = 20.0  # CoSENT's lambda: cosines in [-1, 1] scaled to logits


@dataclass
class SentenceEmbeddingOutput:
    """`sentence_embedding` (B, H) for (B, T) inputs, (B, K, H) for (B, K, T); `loss` in training;
    `token_weights` (B, T) / (B, K, T), each token's lexical weight, for a model with them;
    `bigram_weights` likewise, position t weighing the tokens t and t + 1 together."""

    loss: torch.Tensor | None
    sentence_embedding: torch.Tensor
    token_weights: torch.Tensor | None = None
    bigram_weights: torch.Tensor | None = None


def _gather_with_grad(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Every process's rows of `x` in rank order (this process's keep their gradient) and the
    offset of this process's first row; `x` itself when not running data-parallel. Processes
    may hold different numbers of rows (the last batch of an epoch)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x, 0
    from torch.distributed._functional_collectives import all_gather_single

    world, rank = dist.get_world_size(), dist.get_rank()
    sizes = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([x.shape[0]], dtype=torch.long, device=x.device))
    sizes = [int(s) for s in sizes]
    most = max(sizes)
    padded = torch.cat([x, x.new_zeros(most - x.shape[0], *x.shape[1:])]) if x.shape[0] < most else x
    # differentiable: each process's gradient for the gathered rows is summed back to their owner
    gathered = all_gather_single(padded, 0, dist.group.WORLD).view(world, most, *x.shape[1:])
    rows = torch.cat([part[:n] for part, n in zip(gathered, sizes)])
    return rows, sum(sizes[:rank])


def info_nce(queries: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor | None,
             temperature: float) -> torch.Tensor:
    """Mean cross entropy of each query against every positive and negative of the (global)
    batch, its own positive being the answer. All inputs are normalised here."""
    q = F.normalize(queries.float(), dim=-1)  # (B, H)
    p = F.normalize(positives.float(), dim=-1)  # (B, H)
    all_p, offset = _gather_with_grad(p)  # (N, H), this process's rows from `offset`
    cands = [all_p]
    if negatives is not None and negatives.numel():
        all_n, _ = _gather_with_grad(F.normalize(negatives.float(), dim=-1))
        cands.append(all_n)
    logits = q @ torch.cat(cands).T / temperature  # (B, N [+ negatives])
    target = torch.arange(q.shape[0], device=q.device) + offset
    return F.cross_entropy(logits, target)


Terms = tuple[torch.Tensor, torch.Tensor]  # (N, L) keys (token ids, bigram keys) and their (N, L) weights


def lexical_terms(input_ids: torch.Tensor, token_weights: torch.Tensor,
                  bigram_weights: torch.Tensor | None = None) -> Terms:
    """(N, T) token ids and weights (and bigram weights) -> (N, L) keys and weights: the tokens,
    then (with bigrams) each adjacent pair under its bigram key (L = 2T - 1)."""
    keys, weights = input_ids.long(), token_weights
    if bigram_weights is None:
        return keys, weights
    pairs = bigram_keys(keys[:, :-1], keys[:, 1:])
    return torch.cat([keys, pairs], 1), torch.cat([weights, bigram_weights[:, :-1]], 1)


def shared_sparse_vectors(*terms: Terms) -> list[torch.Tensor]:
    """Each (keys, weights) group -> (N, U) sparse vectors as dense rows over the U keys that
    occur in any group: per key, the largest weight of its occurrences (0 where a text lacks
    it). Differentiable; their dot products are the lexical scores."""
    keys = torch.cat([k.reshape(-1) for k, _ in terms])
    columns, inverse = torch.unique(keys, return_inverse=True)
    out, start = [], 0
    for k, w in terms:
        index = inverse[start:start + k.numel()].view(k.shape)
        start += k.numel()
        rows = w.new_zeros(k.shape[0], len(columns))
        out.append(rows.scatter_reduce(1, index, w, reduce="amax", include_self=True))
    return out


def hybrid_info_nce(queries: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor | None,
                    query_terms: Terms, positive_terms: Terms, negative_terms: Terms | None,
                    temperature: float) -> torch.Tensor:
    """The mean of three InfoNCE losses over the same (global) candidates: on cosines, on lexical
    scores (sparse dot products of the texts' `lexical_terms`) and on their sum, each divided
    by `temperature`."""
    q = F.normalize(queries.float(), dim=-1)
    dense_cands, offset = _gather_with_grad(F.normalize(positives.float(), dim=-1))
    cand_terms = [_gather_terms(positive_terms)]
    if negatives is not None and negatives.numel():
        dense_cands = torch.cat([dense_cands, _gather_with_grad(F.normalize(negatives.float(), dim=-1))[0]])
        cand_terms.append(_gather_terms(negative_terms))
    query_sparse, *cand_sparse = shared_sparse_vectors(query_terms, *cand_terms)
    dense = q @ dense_cands.T
    lexical = query_sparse @ torch.cat(cand_sparse).T
    target = torch.arange(q.shape[0], device=q.device) + offset
    losses = [F.cross_entropy(scores / temperature, target) for scores in (dense, lexical, dense + lexical)]
    return sum(losses) / 3


def _gather_terms(terms: Terms) -> Terms:
    """Every process's (keys, weights) rows, as `_gather_with_grad` (the weights keep their
    gradient); rows of different lengths are padded with key 0 at weight 0, which adds nothing."""
    import torch.distributed as dist

    keys, weights = terms[0], terms[1].float()
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        longest = torch.tensor([keys.shape[1]], device=keys.device)
        dist.all_reduce(longest, op=dist.ReduceOp.MAX)
        extra = int(longest) - keys.shape[1]
        if extra:
            keys, weights = F.pad(keys, (0, extra)), F.pad(weights, (0, extra))
    return _gather_with_grad(keys)[0], _gather_with_grad(weights)[0]


def cosent(first: torch.Tensor, second: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """CoSENT: log(1 + sum over pairs (i, j) with score_i > score_j of exp(s(cos_j - cos_i)))."""
    cos = F.cosine_similarity(first.float(), second.float(), dim=-1) * _COSENT_SCALE  # (B,)
    diff = cos[None, :] - cos[:, None]  # [i, j] = cos_j - cos_i
    ordered = scores[:, None].float() > scores[None, :].float()  # score_i > score_j
    diff = diff.masked_fill(~ordered, float("-inf"))
    flat = torch.cat([diff.new_zeros(1), diff.flatten()])  # the 1 inside log(1 + ...)
    return torch.logsumexp(flat, dim=0)


class ErnieForSentenceEmbedding(PreTrainedEncoder):
    """Backbone (no pooler) + parameter-free pooling (`config.pooling`: "mean" or "cls")."""

    _HF_SUFFIX = "ForSentenceEmbedding"

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        pooling = config.extra.setdefault("pooling", "mean")
        if pooling not in POOLING_MODES:
            raise ConfigError(f"pooling={pooling!r} in config.json is not one of {POOLING_MODES}")
        temperature = config.extra.setdefault("contrastive_temperature", DEFAULT_TEMPERATURE)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
            raise ConfigError(f"contrastive_temperature must be a positive number, got {temperature!r}")
        lexical = config.extra.setdefault("lexical_weights", False)
        if not isinstance(lexical, bool):
            raise ConfigError(f"lexical_weights must be true or false, got {lexical!r}")
        self.pooling = pooling
        self.temperature = float(temperature)
        self.backbone = ErnieModel(config, add_pooling_layer=False)
        bigrams = config.extra.setdefault("lexical_bigrams", False)
        if not isinstance(bigrams, bool):
            raise ConfigError(f"lexical_bigrams must be true or false, got {bigrams!r}")
        if bigrams and not lexical:
            raise ConfigError("lexical_bigrams: true weighs token pairs beside single tokens and needs "
                              "lexical_weights: true too (model.config.lexical_weights=true)")
        self.lexical_linear = torch.nn.Linear(config.hidden_size, 1) if lexical else None
        self.bigram_linear = torch.nn.Linear(2 * config.hidden_size, 1) if bigrams else None
        self.post_init()

    @property
    def has_lexical_weights(self) -> bool:
        return self.lexical_linear is not None

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
              token_type_ids: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """(B, T) token ids -> (B, H) pooled vectors (mean over the attended tokens, or [CLS]),
        the (B, T) lexical weights of a model with them and its (B, T) bigram weights (each
        None for a model without)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        x = self.backbone(input_ids, attention_mask, token_type_ids).last_hidden_state  # (B, T, H)
        weights = pairs = None
        if self.lexical_linear is not None:
            weights, pairs = self._token_weights(x, attention_mask)
        if self.pooling == "cls":
            return x[:, 0], weights, pairs
        mask = attention_mask.to(x.dtype).unsqueeze(-1)  # (B, T, 1)
        return (x * mask).sum(1) / mask.sum(1).clamp(min=1.0), weights, pairs

    def _token_weights(self, hidden: torch.Tensor,
                       attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """relu(linear(h)) per token, 0 for padding and for each row's first and last attended
        token (the [CLS] and [SEP] the tokenizer adds); with bigrams, relu(linear([h_t; h_t+1]))
        per position t, 0 unless tokens t and t + 1 both weigh (the last position: 0)."""
        weights = torch.relu(self.lexical_linear(hidden).squeeze(-1)).float()  # (B, T)
        mask = attention_mask.bool()
        positions = torch.arange(mask.shape[1], device=mask.device)
        last = mask.long().sum(1, keepdim=True) - 1  # right padding
        keep = mask & (positions > 0) & (positions[None, :] != last)
        if self.bigram_linear is None:
            return weights * keep, None
        both = torch.cat([hidden[:, :-1], hidden[:, 1:]], -1)  # (B, T - 1, 2H)
        pairs = torch.relu(self.bigram_linear(both).squeeze(-1)).float() * (keep[:, :-1] & keep[:, 1:])
        return weights * keep, F.pad(pairs, (0, 1))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> SentenceEmbeddingOutput:
        if input_ids.dim() == 2:
            if labels is not None:
                raise DataError("labels need texts in groups: input_ids of shape (batch, texts, sequence)")
            emb, weights, pairs = self.embed(input_ids, attention_mask, token_type_ids)
            return SentenceEmbeddingOutput(loss=None, sentence_embedding=emb, token_weights=weights,
                                           bigram_weights=pairs)
        if input_ids.dim() != 3:
            raise DataError(f"input_ids must be (batch, sequence) or (batch, texts, sequence), "
                            f"got {tuple(input_ids.shape)}")
        B, K, T = input_ids.shape
        training = self.training and torch.is_grad_enabled()
        simcse = K == 1 and training
        if self.lexical_linear is not None and training and (simcse or labels is not None):
            # (evaluating scored pairs is fine: their loss is CoSENT on the vectors, the metric hybrid)
            raise ConfigError("lexical_weights: true learns from retrieval pairs (query, positive[, negatives]); "
                              f"this data has {'scored pairs' if labels is not None else 'single texts'}. Set "
                              "model.config.lexical_weights=false in the recipe, or train on pairs")
        if simcse:  # two views of each text: the same ids, two dropout masks
            c = self.config
            if not (c.hidden_dropout_prob > 0 or c.attention_probs_dropout_prob > 0):
                raise ConfigError("unsupervised SimCSE (one text per example) needs dropout, but this model has "
                                  "hidden_dropout_prob=0 and attention_probs_dropout_prob=0; set "
                                  "model.config.hidden_dropout_prob=0.1 in the recipe, or give pairs")
            input_ids, attention_mask, token_type_ids = (
                None if t is None else t.expand(B, 2, T) for t in (input_ids, attention_mask, token_type_ids))
            K = 2
        flat = [None if t is None else t.reshape(B * K, T) for t in (input_ids, attention_mask, token_type_ids)]
        emb, weights, pairs = self.embed(*flat)
        emb = emb.view(B, K, -1)  # (B, K, H)
        loss = None
        if K >= 2:
            loss = self._loss(emb, labels, None if weights is None else lexical_terms(flat[0], weights, pairs))
        weights, pairs = (None if t is None else t.view(B, K, T) for t in (weights, pairs))
        if simcse:
            emb = emb[:, :1]
            weights, pairs = (None if t is None else t[:, :1] for t in (weights, pairs))
        return SentenceEmbeddingOutput(loss=loss, sentence_embedding=emb, token_weights=weights,
                                       bigram_weights=pairs)

    def _loss(self, emb: torch.Tensor, labels: torch.Tensor | None, terms: Terms | None) -> torch.Tensor:
        """CoSENT for scored pairs; InfoNCE for (query, positive[, negatives]), hybrid with the
        texts' (B * K, L) lexical terms for a model with lexical weights."""
        if labels is not None:
            if emb.shape[1] != 2:
                raise DataError(f"scored pairs need exactly 2 texts per example, got {emb.shape[1]}")
            return cosent(emb[:, 0], emb[:, 1], labels.reshape(-1))
        negatives = emb[:, 2:].reshape(-1, emb.shape[-1]) if emb.shape[1] > 2 else None
        if terms is None:
            return info_nce(emb[:, 0], emb[:, 1], negatives, self.temperature)
        B, K = emb.shape[:2]
        keys, weights = (t.view(B, K, -1) for t in terms)
        negative_terms = None
        if K > 2:
            negative_terms = tuple(t[:, 2:].reshape(B * (K - 2), -1) for t in (keys, weights))
        return hybrid_info_nce(emb[:, 0], emb[:, 1], negatives, (keys[:, 0], weights[:, 0]),
                               (keys[:, 1], weights[:, 1]), negative_terms, self.temperature)

    def save_pretrained(self, directory) -> Path:
        """config.json + model.safetensors, plus sentence-transformers' module files."""
        directory = super().save_pretrained(directory)
        _write_sentence_transformers_files(directory, self.config.hidden_size, self.pooling)
        return directory


def _write_sentence_transformers_files(directory: Path, hidden_size: int, pooling: str) -> None:
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    pool = {"word_embedding_dimension": hidden_size, "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False}
    (directory / "1_Pooling").mkdir(exist_ok=True)
    (directory / "2_Normalize").mkdir(exist_ok=True)
    for path, data in ((directory / "modules.json", modules), (directory / "1_Pooling" / "config.json", pool)):
        with atomic_write(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2) + "\n")
