"""Run the reference test run (ci preset, mlra-4, seed 0, synthetic corpus) in a fresh process.

Used by test_processes.py: ``python run_script.py RUN_DIR [--devices N --strategy ddp]
[--exit-at STEP] [--hold-at STEP DIR] [--kill-writing N]``; prints the run folder it returns. Lightning's DDP
launcher re-runs this file for the other ranks, hence the ``__main__`` guard. ``--exit-at`` ends
the process abruptly (``os._exit``, no clean-up at all), like a killed job, when training
reaches that step. ``--hold-at`` pauses training at that step: it creates ``DIR/held`` and waits
until ``DIR/go`` exists. ``--kill-writing N`` kills the process with SIGKILL half-way through its
``N``-th checkpoint write (``faults.WriteFaults``).
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synthetic import SyntheticData  # noqa: E402

from gtalib.model.presets import model_config  # noqa: E402

from gtalib.training.config import train_config
from gtalib.training.runs import RunSpec  # noqa: E402
from gtalib.training.train import ensure_run  # noqa: E402

DATA = {"name": "synthetic-markov", "version": 1}


class HardExit(Callback):
    def __init__(self, step):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            os._exit(3)


class Hold(Callback):
    def __init__(self, step, folder):
        self.step, self.folder = step, Path(folder)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            (self.folder / "held").touch()
            while not (self.folder / "go").exists():
                time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--exit-at", type=int, default=None)
    ap.add_argument("--hold-at", nargs=2, metavar=("STEP", "DIR"), default=None)
    ap.add_argument("--kill-writing", type=int, default=None)
    args = ap.parse_args()
    if args.kill_writing is not None:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from faults import WriteFaults

        WriteFaults("last.ckpt", args.kill_writing, kill=True).install()
    torch.set_num_threads(1)
    s = RunSpec(model_config("ci", "mlra-4"), train_config("ci"), DATA, 0)
    cbs = [HardExit(args.exit_at)] if args.exit_at is not None else []
    if args.hold_at is not None:
        cbs.append(Hold(int(args.hold_at[0]), args.hold_at[1]))
    dm = SyntheticData(s.train.seq_len, s.train.batch_size, eval_windows=s.train.eval_windows)
    outcome = {}
    print(ensure_run(s, args.run_dir, datamodule=dm, accelerator="cpu", devices=args.devices,
                     strategy=args.strategy, callbacks=cbs, outcome=outcome), flush=True)
    print(f"trained_by: {outcome['trained_by']}", flush=True)


if __name__ == "__main__":
    main()
