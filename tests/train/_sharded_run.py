"""`nlp finetune` with probes, for tests/train/test_sharded.py (launched by torchrun or alone):

    python _sharded_run.py [--stop-step K] [--hang-at-save K] PROBE_DIR -- nlp finetune arguments

The real CLI runs (`nlp.cli.main`), with a callback added to `finetune`:
- after step 1, each process writes PROBE_DIR/rank{r}.json: per parameter, whether it is a DTensor
  (fsdp) or a ZeRO-3 partition (deepspeed), its local and global element counts, the
  process count and its pid;
- --stop-step K: after step K, each process writes PROBE_DIR/stop-rank{r}.json with its pid and
  waits for the test's SIGTERM (which it then handles like any run: save, stop);
- --hang-at-save K: while checkpoint step K is being saved, after this process has written its
  shards (DCP's or DeepSpeed's), it writes its pid to PROBE_DIR/saving-rank{r} and hangs, for the
  test's kill -9.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("probe_dir")
    ap.add_argument("--stop-step", type=int, default=None)
    ap.add_argument("--hang-at-save", type=int, default=None)
    ap.add_argument("cli", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    probes = Path(args.probe_dir)
    probes.mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))

    import nlp.train.finetune as finetune_module
    from nlp.train import dcp_checkpoint, zero

    class Probe:
        def on_step_end(self, trainer, state):
            if state.step == 1:
                from torch.distributed.tensor import DTensor

                if zero.is_engine(trainer._model):
                    params = zero.partitioned_parameters(trainer._model)
                else:
                    params = {name: {"dtensor": isinstance(p, DTensor),
                                     "local": (p.to_local() if isinstance(p, DTensor) else p).numel(),
                                     "global": p.numel()}
                              for name, p in trainer._model.named_parameters()}
                (probes / f"rank{rank}.json").write_text(json.dumps(
                    {"processes": trainer.accelerator.num_processes, "params": params, "pid": os.getpid()}))
            if state.step == args.stop_step:
                (probes / f"stop-rank{rank}.json").write_text(json.dumps({"pid": os.getpid()}))
                deadline = time.monotonic() + 120
                while trainer._stop_signal is None and time.monotonic() < deadline:
                    time.sleep(0.05)

    real_save, real_zero_save, real_finetune = dcp_checkpoint.save_sharded, zero.save, finetune_module.finetune

    def hang_if_saving(checkpoint):
        if checkpoint.name == f".tmp-step-{args.hang_at_save:08d}":
            (probes / f"saving-rank{rank}").write_text(json.dumps({"pid": os.getpid()}))
            time.sleep(300)

    def save_sharded(directory, model, optimizer):
        real_save(directory, model, optimizer)
        hang_if_saving(directory.parent)

    def zero_save(directory, engine):
        real_zero_save(directory, engine)
        hang_if_saving(directory)

    if args.hang_at_save is not None:
        dcp_checkpoint.save_sharded, zero.save = save_sharded, zero_save
    finetune_module.finetune = lambda recipe, loaders=None, callbacks=(): real_finetune(
        recipe, loaders, callbacks=[Probe(), *callbacks])

    from nlp.cli import main as cli_main

    cli = args.cli[1:] if args.cli[:1] == ["--"] else args.cli
    return cli_main(cli)


if __name__ == "__main__":
    sys.exit(main())
