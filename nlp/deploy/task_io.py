"""What an exported model takes and returns, per task: input names, output names and axes.

This table moves to the task specs (`spec.export_inputs`, `spec.export_outputs` in
nlp/tasks/<task>/spec.py) once they exist; until then nlp.deploy reads it here.
"""

from __future__ import annotations

__all__ = ["EXPORT_INPUTS", "EXPORT_OUTPUTS", "export_io"]

# Every task's exported graph takes the same three (batch, sequence) int64 inputs, in this order.
EXPORT_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")

# output name -> its axis names; "batch" and "sequence" are dynamic, "num_labels" is the head's size.
EXPORT_OUTPUTS: dict[str, dict[str, tuple[str, ...]]] = {
    "text-classification": {"logits": ("batch", "num_labels")},
    "token-classification": {"logits": ("batch", "sequence", "num_labels")},
    "question-answering": {"start_logits": ("batch", "sequence"), "end_logits": ("batch", "sequence")},
}


def export_io(task: str) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """(input names, {output name: axis names}) of a canonical task name."""
    return EXPORT_INPUTS, EXPORT_OUTPUTS[task]
