"""``gtalib train`` (one run into the run store) and ``gtalib runs`` (check the store)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gtalib.cli.core import (
    CliError,
    DefaultsFormatter,
    devices,
    non_negative_int,
    positive_float,
    positive_int,
    store_folder,
    variant_name,
)

ACCELERATORS = ("cpu", "gpu", "cuda", "auto")
STRATEGIES = ("auto", "ddp", "fsdp")  # not ddp_spawn: the history must stay in this process

#: Vocabulary size of each tokenizer (bytes: 256 byte values; gpt2: tiktoken's r50k_base, 50,257).
TOKENIZER_VOCAB = {"bytes": 256, "gpt2": 50257}

#: Config field -> the ``gtalib train`` flag that sets it, so errors raised by ModelConfig /
#: TrainConfig name what the user typed.
FIELD_FLAGS = {
    "head_multiplier": "--double-heads", "latent_scale": "--no-latent-scale", "gate": "--gate",
    "init": "--init", "micro_batch_size": "--micro-batch-size", "batch_size": "--batch-size",
    "max_steps": "--max-steps", "warmup_steps": "--warmup-steps", "eval_every": "--eval-every",
    "data_seed": "--data-seed", "lr": "--lr",
}


def name_flag(exc: Exception) -> CliError:
    """``exc`` (from ModelConfig/TrainConfig) as a :class:`CliError` prefixed with the flag of the
    first config field its message names (longest field names first, so ``micro_batch_size`` is
    not read as ``batch_size``)."""
    import re

    msg = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    for field in sorted(FIELD_FLAGS, key=len, reverse=True):
        if re.search(rf"(?<![A-Za-z_]){field}(?![A-Za-z_])", msg):
            return CliError(f"{FIELD_FLAGS[field]}: {msg}")
    return CliError(msg)


def _add_train(sub) -> None:
    from gtalib.model.config import INIT_CHOICES, VARIANTS
    from gtalib.training.config import TRAIN_PRESETS

    p = sub.add_parser(
        "train", help="train one model (skips a finished run, resumes an interrupted one)",
        description="Train one attention variant with the paper's recipe (AdamW, warmup + cosine, "
                    "clip 1.0) at a preset size. The run lives in RUN_DIR/<run id>/ (metrics.csv, "
                    "card.json); the id hashes the full spec, so rerunning the same "
                    "command does nothing and an interrupted run resumes from its last checkpoint.",
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("--variant", type=variant_name, required=True,
                   help=f"attention variant: {', '.join(VARIANTS)} (any case, '_' or '-'), "
                        f"or your own as module.path:ClassName (docs/interfaces.md)")
    p.add_argument("--preset", choices=list(TRAIN_PRESETS), default="cpu",
                   help="model and training sizes (ci: seconds; cpu: the book's default; gpu: one "
                        "GPU; paper: the paper's 2.9 B recipe)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="model-initialisation seed")
    p.add_argument("--run-dir", type=store_folder, default=None,
                   help="run store folder, created if missing (default: $GTALIB_RUN_DIR, else runs/ "
                        "at the repository root, the book's store)")
    g = p.add_argument_group("ablation options")
    g.add_argument("--init", choices=INIT_CHOICES, default="zero",
                   help="zero: W_O and W_down start at 0; normal: N(0, 0.02) like the rest; "
                        "scaled: W_O and W_down N(0, 0.02/sqrt(2 n_layer)) (GPT-2)")
    g.add_argument("--gate", action="store_true", help="sigmoid output gate before W_O")
    g.add_argument("--no-latent-scale", action="store_true",
                   help="drop the latent scale constants (MLA/GLA/MLRA only)")
    g.add_argument("--double-heads", action="store_true",
                   help="twice the query heads, per-head dims and KV cache unchanged")
    t = p.add_argument_group("training overrides (default: the preset's)")
    t.add_argument("--max-steps", type=positive_int,
                   help="optimizer steps; the warmup is rescaled to keep the preset's fraction "
                        "unless --warmup-steps is given")
    t.add_argument("--lr", type=positive_float, help="peak learning rate")
    t.add_argument("--warmup-steps", type=non_negative_int, help="linear warmup steps")
    t.add_argument("--batch-size", type=positive_int, help="sequences per optimizer step (global)")
    t.add_argument("--micro-batch-size", type=positive_int, help="sequences per forward pass per device")
    t.add_argument("--eval-every", type=positive_int, help="validation interval in steps")
    t.add_argument("--data-seed", type=non_negative_int, help="seed of the batch order")
    d = p.add_argument_group("data")
    d.add_argument("--corpus", default="default",
                   help="'default' (registry prose, built on first use) or a built corpus name such as "
                        "fineweb-edu-<config> (made by `gtalib data build --corpus fineweb-edu --config ...`)")
    d.add_argument("--tokenizer", choices=("bytes", "gpt2"), default=None,
                   help="default: bytes for a 256-token vocabulary, gpt2 otherwise")
    d.add_argument("--data-dir", type=store_folder, default=None, help="data cache (default $GTALIB_DATA_DIR or <repo>/data_cache)")
    h = p.add_argument_group("hardware (not part of the run id)")
    h.add_argument("--accelerator", choices=ACCELERATORS, default="auto",
                   help="device type; auto picks a GPU when CUDA sees one, else the CPU")
    h.add_argument("--devices", type=devices, default=1, help="devices per node (an integer, or 'auto')")
    h.add_argument("--num-nodes", type=positive_int, default=1,
                   help="machines taking part (multi-node needs --strategy ddp/fsdp and a launcher "
                        "such as torchrun or SLURM)")
    h.add_argument("--strategy", choices=STRATEGIES, default="auto",
                   help="Lightning strategy; ddp/fsdp for devices > 1 or num-nodes > 1")
    h.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads")
    h.add_argument("--quiet", action="store_true", help="no progress bar")
    h.add_argument("--keep-checkpoint", action="store_true",
                   help="keep checkpoints/last.ckpt (final weights + optimizer) after the run is done")
    h.add_argument("--ignore-disk-space", action="store_true",
                   help="train even where the run store's file system has less space free than "
                        "the run is predicted to need (its checkpoint twice, from the model's "
                        "size, and its results)")
    p.set_defaults(func=cmd_train)


def _built_corpora(data_dir) -> list[str]:
    """Names of the corpora built under ``data_dir`` (folders ``corpora/<name>-<tokenizer>``)."""
    from gtalib.data.build import resolve_data_dir

    root = resolve_data_dir(data_dir) / "corpora"
    names = set()
    for d in root.glob("*/manifest.json") if root.is_dir() else ():
        name, _, tok = d.parent.name.rpartition("-")
        if tok in TOKENIZER_VOCAB:
            names.add(name)
    return sorted(names)


def _check_train_args(args, vocab_size: int) -> str:
    """Checks that need no corpus and no Lightning, so a bad command fails in a second with a
    message naming the flag. Returns the tokenizer name.

    Raises:
        CliError: --accelerator gpu without CUDA, a --tokenizer the preset's vocabulary cannot
            hold, a --corpus that is not built (a --run-dir that is a file is refused as the
            options are read: :func:`gtalib.cli.core.store_folder`).
    """
    import torch

    from gtalib.data.build import corpus_dir

    if args.accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise CliError(f"--accelerator {args.accelerator}: no CUDA device found; "
                       f"use --accelerator cpu or auto")
    fits = [t for t, v in TOKENIZER_VOCAB.items() if v <= vocab_size]
    tokenizer = args.tokenizer or ("bytes" if vocab_size == 256 else "gpt2")
    if tokenizer not in fits:
        raise CliError(f"argument --tokenizer: {tokenizer!r} has {TOKENIZER_VOCAB[tokenizer]} tokens, "
                       f"more than the {args.preset} preset's vocab_size={vocab_size}; "
                       f"allowed for --preset {args.preset}: {', '.join(fits)}")
    if args.corpus != "default" and not (corpus_dir(args.corpus, tokenizer, args.data_dir)
                                         / "manifest.json").is_file():
        built = [c for c in _built_corpora(args.data_dir) if c != "default"]
        raise CliError(f"--corpus {args.corpus!r} is not built with tokenizer {tokenizer!r}; allowed: "
                       f"'default', a built corpus ({', '.join(built) or 'none built yet'}), or "
                       f"build one, e.g. fineweb-edu-<config> with `gtalib data build --corpus "
                       f"fineweb-edu --config ...`")
    return tokenizer


def _final_losses(path: Path) -> str:
    from gtalib.training.runs import load_card

    c = load_card(path)
    val = c.get("final_val_loss")
    return (f"final train loss {c['final_train_loss']:.4f}, "
            f"val loss {'n/a' if val is None else f'{val:.4f}'}")


def cmd_train(args) -> int:
    """Handler of ``gtalib train``: validates the arguments, builds the spec, ensures the run and
    prints where it is ("already done (skipped)" for a finished run). Ctrl-C exits 130. A run
    store with less space free than the run needs is refused before training
    (``--ignore-disk-space`` goes on), and a disk that fills up while it trains ends the command
    with one line naming the store, the space free and the checkpoint kept (exit 2)."""
    import signal

    import torch

    from gtalib.model.presets import model_config
    from gtalib.training.config import train_config
    from gtalib.training.runs import (
        RunSpec,
        is_done,
        load_metrics,
        make_datamodule,
        resolve_run_dir,
        run_path,
    )
    from gtalib.training.disk import check_space, held_bytes, run_bytes
    from gtalib.training.train import ensure_run

    args.run_dir = str(resolve_run_dir(args.run_dir))
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model = model_config(args.preset, args.variant, init=args.init, gate=args.gate,
                             latent_scale=not args.no_latent_scale,
                             head_multiplier=2 if args.double_heads else 1)
        train = train_config(args.preset, max_steps=args.max_steps, lr=args.lr,
                             warmup_steps=args.warmup_steps,
                             batch_size=args.batch_size, micro_batch_size=args.micro_batch_size,
                             eval_every=args.eval_every, data_seed=args.data_seed)
    except (ValueError, KeyError) as exc:
        raise name_flag(exc) from None
    tokenizer = _check_train_args(args, model.vocab_size)
    dm = make_datamodule(args.corpus, tokenizer, train, args.data_dir, build=True)
    dm.prepare_data()  # builds the default corpus on first use
    spec = RunSpec(model, train, {"corpus": args.corpus, "tokenizer": tokenizer,
                                  "identity": dm.data_identity()}, args.seed)
    path = run_path(spec, args.run_dir)
    if is_done(path):
        load_metrics(path)  # a truncated/corrupt finished run is an error, not a skip
        print(f"run {spec.run_id} ({spec.describe()}): already done (skipped): {path}; "
              f"{_final_losses(path)}")
        return 0
    if not args.ignore_disk_space:
        check_space(args.run_dir, sum(run_bytes(spec)) - held_bytes(path), "this run")
    # Lightning turns Ctrl-C into SystemExit(1) after its own cleanup: remember it was Ctrl-C
    interrupted = []

    def on_sigint(signum, frame):
        interrupted.append(True)
        signal.default_int_handler(signum, frame)

    old = signal.signal(signal.SIGINT, on_sigint)
    outcome = {}  # who trained it: this process, or the one it waited for
    try:
        path = ensure_run(spec, args.run_dir, datamodule=dm, accelerator=args.accelerator,
                          devices=args.devices, num_nodes=args.num_nodes, strategy=args.strategy,
                          progress=not args.quiet, keep_checkpoint=args.keep_checkpoint,
                          outcome=outcome)
    except (KeyboardInterrupt, SystemExit) as exc:
        path = run_path(spec, args.run_dir)
        if isinstance(exc, SystemExit) and not interrupted and is_done(path):
            raise
        # Ctrl-C, or SIGTERM (a scheduler's stop: Lightning turns it into SystemExit, with
        # status 0): never report an unfinished run as a success
        sigterm = isinstance(exc, SystemExit) and not interrupted
        print(f"gtalib train: {'stopped by SIGTERM' if sigterm else 'interrupted'} before the "
              f"run finished; rerun the same command to resume from the last checkpoint "
              f"({path})", file=sys.stderr)
        return 143 if sigterm else 130
    finally:
        signal.signal(signal.SIGINT, old)
    trained_by = outcome.get("trained_by", "this process")
    if trained_by not in ("this process", "already done"):
        print(f"run {spec.run_id} ({spec.describe()}): trained meanwhile by the process this "
              f"one waited for ({trained_by}): {_final_losses(path)}")
    elif (path / "card.json").exists():
        c = json.loads((path / "card.json").read_text())
        print(f"run {spec.run_id} ({spec.describe()}): trained: {_final_losses(path)}, "
              f"{c['tokens_per_s']} tokens/s")
    print(path)
    return 0


def _add_runs(sub) -> None:
    p = sub.add_parser(
        "runs", help="list the corrupt or incomplete runs of a run store (--remove: delete them)",
        description="Check every run of a run store: a finished run whose files do not check out "
                    "(metrics.csv cell of the wrong type, non-finite loss, truncated; bad JSON) is "
                    "corrupt, a run without DONE is incomplete. Lists them (exit status 1 if any); "
                    "with --remove deletes their folders, so the next `gtalib book` or `gtalib "
                    "train` retrains them. A run that a process is training (it holds the run's "
                    "lock) is listed with that process and host, and never removed.",
    )
    p.add_argument("--run-dir", default=None,
                   help="run store folder (default: $GTALIB_RUN_DIR, else runs/ at the repository root)")
    p.add_argument("--remove", action="store_true",
                   help="delete the corrupt and incomplete run folders (an interrupted run then "
                        "restarts from step 0 instead of resuming)")
    p.set_defaults(func=cmd_runs)


def cmd_runs(args) -> int:
    """Handler of ``gtalib runs``: one line per corrupt or incomplete run and a summary; 0 when the
    store holds none (or they were removed), 1 otherwise."""
    from gtalib.training.runs import check_store, remove_run, resolve_run_dir

    run_dir = resolve_run_dir(args.run_dir)
    if args.run_dir is None and not run_dir.exists():  # a fresh clone: nothing trained yet
        print(f"0 runs in {run_dir} (no run store yet)")
        return 0
    if not run_dir.is_dir():
        raise CliError(f"--run-dir {args.run_dir or run_dir}: "
                       f"{'is not a folder' if run_dir.exists() else 'no such folder'}")
    states = check_store(run_dir)
    for r in states:
        if r.state == "training":
            print(f"{r.run_id}  training: {r.detail}")
    bad = [r for r in states if r.state in ("incomplete", "corrupt")]
    for r in bad:
        print(f"{r.run_id}  {r.state}: {r.detail}")
        if args.remove:
            remove_run(r.path)
            print(f"{r.run_id}  removed")
    counts = {k: sum(r.state == k for r in states) for k in ("done", "training", "incomplete", "corrupt")}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v or k != "training")
    print(f"{len(states)} run{'' if len(states) == 1 else 's'} in {run_dir}: {summary}"
          + (f"; removed {len(bad)}" if args.remove and bad else ""))
    return 1 if bad and not args.remove else 0


def add_cli(subparsers) -> None:
    """Register ``gtalib train`` and ``gtalib runs`` on an argparse ``subparsers`` object."""
    _add_train(subparsers)
    _add_runs(subparsers)
