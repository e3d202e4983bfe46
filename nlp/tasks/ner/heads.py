"""Token classification head (NER): backbone -> dropout -> linear, optionally a linear-chain CRF.

Without the CRF this is transformers' `ErnieForTokenClassification` / `BertForTokenClassification`
(no pooler, `classifier`), loss = cross entropy over positions whose label is not -100.

With `use_crf=True` in the config (an extra config.json key, kept on round trips), the logits
are the CRF's emissions and the loss is the CRF negative log-likelihood over the positions
whose label is not -100, taken in order as one chain (see nlp/tasks/ner/crf.py for the saved
`crf.*` keys). Decode with `model.decode(logits, mask)`, which runs Viterbi with the CRF and
a well-formed-tag Viterbi (or plain argmax) without it, over the positions of `mask` (the same positions that carry labels in
training: first sub-tokens of words, no special tokens). Packed rows (`pack_ids`) work without
the CRF; with it they are refused (a chain would run across the sequences of a row).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nlp._common import DataError
from nlp.models import Dropout, ErnieConfig, ErnieModel, PreTrainedEncoder
from nlp.tasks.ner.constrained import SparseRules, structured_viterbi
from nlp.tasks.ner.crf import CRF_KEYS, LinearChainCRF, compact, crf_scores, viterbi
from nlp.tasks.ner.tags import allowed_transitions

__all__ = ["ErnieForTokenClassification", "TokenClassifierOutput", "decode_constrained_rows", "decode_tags"]


@dataclass
class TokenClassifierOutput:
    """`logits` (B, T, num_labels) (the CRF emissions when the model has one); `loss` with labels."""

    loss: torch.Tensor | None
    logits: torch.Tensor


class ErnieForTokenClassification(PreTrainedEncoder):
    """Backbone (no pooler) + dropout + `classifier` (H -> num_labels) [+ `crf`]."""

    _HF_SUFFIX = "ForTokenClassification"

    def __init__(self, config: ErnieConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.backbone = ErnieModel(config, add_pooling_layer=False)
        p = config.classifier_dropout
        self.dropout = Dropout(config.hidden_dropout_prob if p is None else p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        use_crf = config.extra.get("use_crf", False)
        if not isinstance(use_crf, bool):
            raise DataError(f"use_crf must be true or false in config.json, got {use_crf!r}")
        self.crf = LinearChainCRF(config.num_labels) if use_crf else None
        self.post_init()

    @property
    def use_crf(self) -> bool:
        return self.crf is not None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, task_type_ids: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, pack_ids: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> TokenClassifierOutput:
        x = self.backbone(input_ids, attention_mask, token_type_ids, task_type_ids,
                          position_ids, pack_ids).last_hidden_state  # (B, T, H)
        logits = self.classifier(self.dropout(x))  # (B, T, L)
        loss = None
        if labels is not None:
            if tuple(labels.shape) != tuple(input_ids.shape):
                raise DataError(f"labels has shape {tuple(labels.shape)} but input_ids "
                                f"{tuple(input_ids.shape)}; give one label per token (-100 to ignore)")
            n = self.num_labels
            bad = labels[(labels != -100) & ((labels < 0) | (labels >= n))]
            if bad.numel():
                raise DataError(f"tag id {int(bad[0])} is outside the {n} tags [0, {n}) of this "
                                "model; set id2label to the tag list of your data")
            if self.crf is None:
                loss = F.cross_entropy(logits.view(-1, n).float(), labels.reshape(-1).long(), ignore_index=-100)
            else:
                if pack_ids is not None:  # one chain per row would run across packed sequences
                    raise DataError("the CRF head does not take packed rows (pack_ids): its chain "
                                    "would cross sequence boundaries; use DataCollatorWithPadding")
                mask = labels != -100
                loss = self.crf.neg_log_likelihood(logits, labels.clamp(min=0), mask)
        return TokenClassifierOutput(loss=loss, logits=logits)

    @torch.no_grad()
    def decode(self, logits: torch.Tensor, mask: torch.Tensor, *, constrained: bool = True) -> list[list[int]]:
        """Tag ids for the positions where `mask` is True, per row, in order (see `decode_tags`)."""
        return decode_tags(logits, mask, self.config.id2label, crf=crf_scores(self.decoding_tensors()),
                           constrained=constrained)

    def decoding_tensors(self) -> dict[str, torch.Tensor]:
        """The CRF's scores by `CRF_KEYS` (none without a CRF): Viterbi runs outside the network,
        so a backend and an export carry them beside the emissions."""
        if self.crf is None:
            return {}
        return {k: getattr(self.crf, k.split(".", 1)[1]).detach() for k in CRF_KEYS}


@torch.no_grad()
def decode_tags(logits: torch.Tensor, mask: torch.Tensor, id2label: dict[int, str] | None, *,
                crf: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                constrained: bool = True) -> list[list[int]]:
    """Tag ids for the positions where `mask` is True, per row, in order.

    With `crf` (transitions (L, L), start (L,), end (L,)): its Viterbi path. Without: with
    `constrained` (the default) and a BIO/BIOES label set (`id2label`), the most probable tag
    sequence that is well formed (no `I-X` after `O` or after another type; BIOES entities
    closed), i.e. Viterbi over the per-token log-probabilities with forbidden transitions;
    otherwise the argmax per token. Unconstrained argmax splits an entity wherever one inner
    token's argmax flips to the wrong prefix, which costs precision most (an `I-X` after `O`
    counts as a new entity). A function of the logits alone (plus the CRF's scores), so the
    pipelines decode the same way whatever backend produced the logits.

    Constrained decoding runs in O(T*K) where the rules allow it (nlp/tasks/ner/constrained.py:
    BIO and BIOES tag sets), with the same paths as the general O(T*K^2) Viterbi."""
    mask = mask.bool()
    if crf is not None:
        return viterbi(logits, mask, *(torch.as_tensor(t, device=logits.device) for t in crf))
    rules = _rules_of(_label_names(id2label, logits.shape[-1])) if constrained else None
    if rules is None:
        best = logits.argmax(-1)  # (B, T)
        return [row[m].tolist() for row, m in zip(best, mask)]
    scores, sparse = rules
    logp = F.log_softmax(logits.float(), dim=-1)
    if sparse is not None:
        em, _, kept = compact(logp, mask)  # each row's positions to the front
        paths = structured_viterbi(em[kept].cpu().numpy(), kept.sum(1).tolist(), sparse)
        if paths is not None:
            return paths
    return viterbi(logp, mask, *(t.to(logits.device) for t in scores))


def decode_constrained_rows(logits: Sequence[np.ndarray], id2label: dict[int, str] | None) -> list[list[int]] | None:
    """`decode_tags`' constrained decoding (no CRF) of ragged rows, each (n_i, K) logits with
    every position decoded, without padding them into one tensor: the same paths, or None where
    the O(T*K) path does not apply (then pad and call `decode_tags`). Rows of similar length are
    decoded together, a few thousand positions at a time (arrays that stay in cache)."""
    if not logits:
        return []
    rules = _rules_of(_label_names(id2label, logits[0].shape[-1]))
    if rules is None or rules[1] is None:
        return None
    out: list[list[int]] = [[] for _ in logits]
    for group in _groups_of_positions(logits, _DECODE_POSITIONS):
        flat = torch.from_numpy(np.concatenate([np.asarray(logits[i], dtype=np.float32) for i in group]))
        logp = F.log_softmax(flat, dim=-1).numpy()  # row by row, as over a padded batch
        paths = structured_viterbi(logp, [len(logits[i]) for i in group], rules[1])
        if paths is None:
            return None
        for i, path in zip(group, paths):
            out[i] = path
    return out


# positions decoded at once by decode_constrained_rows: arrays of ~20 MB at 168 tags, which the
# allocator reuses (larger ones are mapped and page-faulted afresh each call)
_DECODE_POSITIONS = 32768


def _groups_of_positions(rows: Sequence[np.ndarray], limit: int) -> list[list[int]]:
    """Row indices, longest first, in groups of at most `limit` positions (a longer row alone)."""
    groups: list[list[int]] = [[]]
    size = 0
    for i in sorted(range(len(rows)), key=lambda i: -len(rows[i])):
        if groups[-1] and size + len(rows[i]) > limit:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += len(rows[i])
    return groups


def _label_names(id2label: dict[int, str] | None, num_labels: int) -> tuple[str | None, ...]:
    id2label = id2label or {}
    return tuple(id2label.get(i) for i in range(num_labels))


@functools.lru_cache(maxsize=64)
def _rules_of(names: tuple[str | None, ...]) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                                                      SparseRules | None] | None:
    """(the general decoder's (transitions, start, end) on CPU, the same rules for the O(T*K)
    path or None), or None when the labels are not a BIO/BIOES tag set; once per label set."""
    allowed = allowed_transitions(names) if all(isinstance(n, str) for n in names) else None
    if allowed is None:
        return None
    scores = tuple(torch.tensor(a).logical_not().float() * -1e4 for a in allowed)
    return scores, SparseRules.from_scores(*(t.numpy() for t in scores))


def _transition_rules(id2label: dict[int, str] | None, num_labels: int,
                      device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(transitions, start, end) scores of the label set's scheme: 0 allowed, -1e4 forbidden."""
    rules = _rules_of(_label_names(id2label, num_labels))
    return None if rules is None else tuple(t.to(device) for t in rules[0])
