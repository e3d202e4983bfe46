"""nlp.train: the accelerate-driven fine-tuning engine.

    from nlp.train import Trainer, TrainSettings
    trainer = Trainer(model, TrainSettings(output_dir="runs/x"), train_dataset=train,
                      collate_fn=collate, eval_dataset=dev, compute_metrics=metrics)
    trainer.train()

Settings are typed dataclasses (`nlp.train.settings`) shared with the recipe files, built and
checked by one schema engine (`nlp.train.schema`); see
docs/training.md for the knobs, the run directory layout and data-parallel launching.
"""

from nlp._extras import require

# the train extra: without it, importing the engine fails here in one line naming the extra,
# not deep inside accelerate's or datasets' absence
for _module in ("accelerate", "datasets"):
    require(_module, "training and evaluation (nlp.train: `nlp finetune`, `nlp evaluate`, `nlp pretrain`)")

from nlp.train.checkpoint import TrainerState
from nlp.train.errors import CheckpointWriteError, TrainingError, TrainingInterrupted
from nlp.train.evaluation import EvalPrediction
from nlp.train.schema import apply_overrides, from_dict, parse_overrides, to_dict
from nlp.train.settings import (
    CheckpointSettings,
    DataSettings,
    DistributedSettings,
    EvalSettings,
    LogSettings,
    OptimSettings,
    ScheduleSettings,
    TrainSettings,
)
from nlp.train.trainer import Trainer, TrainResult

__all__ = [
    "Trainer",
    "TrainResult",
    "TrainSettings",
    "OptimSettings",
    "ScheduleSettings",
    "DataSettings",
    "EvalSettings",
    "CheckpointSettings",
    "LogSettings",
    "DistributedSettings",
    "from_dict",
    "to_dict",
    "parse_overrides",
    "apply_overrides",
    "EvalPrediction",
    "TrainerState",
    "TrainingError",
    "TrainingInterrupted",
    "CheckpointWriteError",
]
