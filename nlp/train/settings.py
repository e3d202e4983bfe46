"""Training settings: typed dataclasses, each validated when it is constructed.

Why one schema for the library and the recipes: `nlp finetune recipe.yaml lr=...` and
`Trainer(model, TrainSettings(...))` must accept exactly the same knobs, so that a recipe is
nothing more than these dataclasses written as YAML. `from_dict` (the schema engine,
`nlp.train.schema`, re-exported here) turns a nested mapping (a parsed YAML section) into the
dataclasses and reports every unknown key, wrong type and bad value at once;
`parse_overrides` + `apply_overrides` put command-line `key.sub=value` pairs into that mapping
first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Literal

from nlp._common import did_you_mean
from nlp.train.schema import Problem, Settings, apply_overrides, from_dict, parse_overrides, to_dict

__all__ = [
    "OptimSettings",
    "ScheduleSettings",
    "DataSettings",
    "EvalSettings",
    "CheckpointSettings",
    "LogSettings",
    "DistributedSettings",
    "TrainSettings",
    # the schema engine's functions, re-exported: the settings' own API since the start
    "from_dict",
    "to_dict",
    "parse_overrides",
    "apply_overrides",
]

MixedPrecision = Literal["auto", "no", "fp16", "bf16"]


@dataclass
class OptimSettings(Settings):
    """AdamW. Biases and normalisation weights never get weight decay (see `nlp.train.optim`)."""

    lr: float = 5e-5  # peak learning rate, reached at the end of warmup
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    max_grad_norm: float | None = 1.0  # gradient clipping; None turns it off
    # fused: one kernel per parameter (CUDA, CPU; the fastest); foreach: batched ops;
    # auto picks fused where torch has the kernel for the parameters' device, else foreach.
    impl: Literal["auto", "fused", "foreach", "for_loop"] = "auto"

    def problems(self) -> Iterator[Problem]:
        if self.lr <= 0:
            yield Problem("lr", f"lr must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            yield Problem("weight_decay", f"weight_decay must be >= 0, got {self.weight_decay}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            yield Problem("betas", f"betas must lie in [0, 1), got {list(self.betas)}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            yield Problem("max_grad_norm", f"max_grad_norm must be > 0 or null, got {self.max_grad_norm}")


@dataclass
class ScheduleSettings(Settings):
    """Learning-rate schedule: warmup from 0 to `optim.lr`, then decay."""

    name: Literal["linear", "cosine", "constant"] = "linear"
    warmup_ratio: float = 0.1  # fraction of all optimizer steps spent warming up
    warmup_steps: int | None = None  # overrides warmup_ratio when given
    min_lr_ratio: float = 0.0  # floor of the decay, as a fraction of lr

    def problems(self) -> Iterator[Problem]:
        if not 0.0 <= self.warmup_ratio <= 1.0:
            yield Problem("warmup_ratio", f"warmup_ratio must lie in [0, 1], got {self.warmup_ratio}")
        if self.warmup_steps is not None and self.warmup_steps < 0:
            yield Problem("warmup_steps", f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            yield Problem("min_lr_ratio", f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio}")


@dataclass
class DataSettings(Settings):
    """How examples become batches.

    `batch_size` is the GLOBAL micro-batch: summed over all processes, so a recipe gives the
    same optimisation on 1 or N processes (each process takes batch_size / world_size). One
    optimizer step sees batch_size * grad_accum_steps examples.
    """

    batch_size: int = 32
    eval_batch_size: int | None = None  # defaults to 2 * batch_size (no activations kept)
    # dynamic: shuffle, pad each batch to its longest; length_grouped: batches of similar
    # lengths (less padding, still shuffled); packed: several short sequences per row
    # (the task layer then passes a PackingCollator). See docs/training.md.
    batching: Literal["dynamic", "length_grouped", "packed"] = "dynamic"
    # batching=packed: the row length the PackingCollator packs to; batch_size then counts
    # rows of packed sequences instead of examples.
    pack_max_length: int | None = None
    shuffle: bool = True
    drop_last: bool = False
    num_workers: int = 0  # DataLoader workers; 0 keeps collation in the main process

    def problems(self) -> Iterator[Problem]:
        if self.batch_size < 1:
            yield Problem("batch_size", f"batch_size must be >= 1, got {self.batch_size}")
        if self.eval_batch_size is not None and self.eval_batch_size < 1:
            yield Problem("eval_batch_size", f"eval_batch_size must be >= 1, got {self.eval_batch_size}")
        if self.batching == "packed" and not self.pack_max_length:
            yield Problem("batching", "batching=packed needs pack_max_length (e.g. 128, the model's max length)")
        if self.pack_max_length is not None and self.pack_max_length < 1:
            yield Problem("pack_max_length", f"pack_max_length must be >= 1, got {self.pack_max_length}")
        if self.num_workers < 0:
            yield Problem("num_workers", f"num_workers must be >= 0, got {self.num_workers}")


@dataclass
class EvalSettings(Settings):
    """When to evaluate, which metric picks the best checkpoint, and early stopping."""

    every_steps: int | None = None  # also evaluate every N optimizer steps; None: epochs only
    at_epoch_end: bool = True
    metric: str = "loss"  # a key of compute_metrics' result, or "loss"
    # None: "loss"-like metrics are better when lower, everything else when higher
    greater_is_better: bool | None = None
    early_stopping_patience: int | None = None  # evaluations without improvement; None: off

    def problems(self) -> Iterator[Problem]:
        if self.every_steps is not None and self.every_steps < 1:
            yield Problem("every_steps", f"every_steps must be >= 1 or null, got {self.every_steps}")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 1:
            yield Problem("early_stopping_patience",
                          f"early_stopping_patience must be >= 1 or null, got {self.early_stopping_patience}")

    @property
    def higher_is_better(self) -> bool:
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not ("loss" in self.metric or "perplexity" in self.metric)


@dataclass
class CheckpointSettings(Settings):
    """Resumable checkpoints under OUTPUT_DIR/checkpoints/step-NNNNNNN.

    A checkpoint is written at each evaluation, at each epoch end, every `every_steps`, and
    on SIGINT/SIGTERM. The last `keep_last` plus the best one are kept.
    """

    every_steps: int | None = None
    keep_last: int = 2
    load_best_at_end: bool = True  # the final model (model/) is the best one, not the last

    def problems(self) -> Iterator[Problem]:
        if self.every_steps is not None and self.every_steps < 1:
            yield Problem("every_steps", f"every_steps must be >= 1 or null, got {self.every_steps}")
        if self.keep_last < 1:
            yield Problem("keep_last", f"keep_last must be >= 1, got {self.keep_last}")


@dataclass
class LogSettings(Settings):
    """What the run shows and writes (metrics.jsonl is always written)."""

    every_steps: int = 10
    progress_bar: bool = True
    tensorboard: bool = True  # through accelerate's tracker, under OUTPUT_DIR/tensorboard
    plots: bool = True  # loss.png, lr.png, eval.png in OUTPUT_DIR

    def problems(self) -> Iterator[Problem]:
        if self.every_steps < 1:
            yield Problem("every_steps", f"every_steps must be >= 1, got {self.every_steps}")


@dataclass
class DistributedSettings(Settings):
    """How several processes share the work (docs/training.md, "Past one process").

    ddp: every process holds the whole model, gradients are averaged (accelerate's DDP).
    fsdp: parameters, gradients and optimizer state are sharded over the processes (torch FSDP2,
    one unit per encoder layer), checkpoints too (torch.distributed.checkpoint): for models whose
    training state does not fit one device. Same losses as ddp; more communication.
    deepspeed: DeepSpeed ZeRO (nlp.train.zero, an optional install), stage 2 (gradients and
    optimizer state split, parameters whole) or 3 (parameters split too), its own checkpoints.
    Each is one module of nlp.train.strategies; a strategy from outside the package registers
    there (nlp.train.strategies.register_strategy)."""

    strategy: str = "ddp"  # a name in nlp.train.strategies' registry
    # How long a collective (an all-reduce, a barrier, a checkpoint's gather) waits for the
    # slowest process before the run ends with an error naming the process that did not come:
    # a hung process (stopped, deadlocked, on a dead node) must not hold the others forever.
    # Above the longest thing one process does alone while the others wait at a barrier (the main
    # process writing the final model or a checkpoint); torch's own default is 30 minutes (gloo).
    timeout_s: float = 600.0
    # fsdp: free each layer's gathered parameters after its forward (gather them again for the
    # backward): less memory, one more all-gather per layer and step
    reshard_after_forward: bool = True
    # fsdp on GPUs: keep the shards and the optimizer step in CPU memory (slower steps)
    cpu_offload: bool = False
    # deepspeed: ZeRO stage 2 (parameters whole on every process: no gathers in the forward) or
    # 3 (parameters split too: the least memory, an all-gather per layer); null: 2
    zero_stage: int | None = None

    def problems(self) -> Iterator[Problem]:
        from nlp.train.strategies import strategy_names  # the registry (imports no strategy)

        names = strategy_names()
        if self.strategy not in names:
            yield Problem("strategy", f"strategy {self.strategy!r} is not one of {', '.join(map(repr, names))}."
                                      f"{did_you_mean(self.strategy, names)}")
        if not self.timeout_s > 0:
            yield Problem("timeout_s", f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        if self.zero_stage is not None and self.strategy != "deepspeed":
            yield Problem("zero_stage", f"zero_stage={self.zero_stage} applies to strategy=deepspeed only "
                                        f"(strategy is {self.strategy!r}); set strategy=deepspeed, or "
                                        "remove zero_stage")
        elif self.zero_stage is not None and self.zero_stage not in (2, 3):
            yield Problem("zero_stage", f"zero_stage must be 2 or 3, got {self.zero_stage} (stage 1 "
                                        "splits only the optimizer state: use 2, which costs no more "
                                        "traffic; stage 0 is strategy=ddp)")

    @property
    def stage(self) -> int:
        """The ZeRO stage a deepspeed run uses."""
        return 2 if self.zero_stage is None else self.zero_stage


@dataclass
class TrainSettings(Settings):
    """Everything the fine-tuning engine needs to know, none of it task-specific."""

    output_dir: str = "runs/run"
    seed: int = 42
    epochs: float = 3.0  # may be fractional; max_steps wins when both are given
    max_steps: int | None = None
    grad_accum_steps: int = 1
    # auto: bf16 on CUDA Ampere+, fp16 with loss scaling on older CUDA; on CPU bf16 where the
    # CPU has it natively (AVX512-BF16 or AMX), else no (emulated bf16 runs at ~half fp32 speed).
    mixed_precision: MixedPrecision = "auto"
    gradient_checkpointing: bool = False  # recompute activations: less memory, ~30% slower
    cpu: bool = False  # run on CPU even when a GPU is present
    # auto: resume from OUTPUT_DIR's last checkpoint if any; never: refuse a non-empty
    # OUTPUT_DIR; must: fail unless there is a checkpoint. A path resumes that checkpoint.
    resume: str = "auto"
    max_nonfinite_steps: int = 5  # stop after this many NaN/inf losses in a row
    optim: OptimSettings = field(default_factory=OptimSettings)
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    data: DataSettings = field(default_factory=DataSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    log: LogSettings = field(default_factory=LogSettings)
    distributed: DistributedSettings = field(default_factory=DistributedSettings)

    def problems(self) -> Iterator[Problem]:
        if self.epochs <= 0 and self.max_steps is None:
            yield Problem("epochs", f"epochs must be > 0 (or give max_steps), got {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            yield Problem("max_steps", f"max_steps must be >= 1 or null, got {self.max_steps}")
        if self.grad_accum_steps < 1:
            yield Problem("grad_accum_steps", f"grad_accum_steps must be >= 1, got {self.grad_accum_steps}")
        if self.max_nonfinite_steps < 1:
            yield Problem("max_nonfinite_steps", f"max_nonfinite_steps must be >= 1, got {self.max_nonfinite_steps}")
        if not self.output_dir:
            yield Problem("output_dir", "output_dir must not be empty")
