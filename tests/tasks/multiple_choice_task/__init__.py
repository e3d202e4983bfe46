"""A multiple-choice task written from outside `nlp`, as a user would: a question (or context)
paired with N candidate answers, inputs of shape batch x choices x sequence, the label is the
index of the right choice.

It is the proof of docs/tasks.md's "what to write for a task": written from that list alone and
registered with the public `nlp.tasks.register_task` when this module is imported, it trains,
evaluates, exports, predicts and serves through the `nlp` CLI (tests/tasks/test_multiple_choice_task.py)
with no change inside `nlp/`. A CLI process imports it through the plugin variable:
``NLP_TASK_PLUGINS=tasks.multiple_choice_task`` (with tests/ on PYTHONPATH).
"""

from nlp.tasks import register_task

from .spec import MULTIPLE_CHOICE, MultipleChoiceSettings, MultipleChoiceSpec

__all__ = ["MULTIPLE_CHOICE", "MultipleChoiceSpec", "MultipleChoiceSettings"]

register_task(MULTIPLE_CHOICE)
