"""``gtalib decode``: tensor-parallel decode of a small random model (:mod:`gtalib.decode.tp`);
under ``torchrun --nproc-per-node N -m gtalib decode ...`` each process is one rank."""

from __future__ import annotations

import argparse
import os

from gtalib.cli.core import DefaultsFormatter, positive_int, variant_name


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Register ``gtalib decode``: decode a small random model at one TP degree, compare with
    the single-process model, print the per-rank cache and the all-reduce traffic. A degree the
    variant cannot take (or another bad value) is a one-line error with exit status 2
    (:func:`gtalib.cli.core.run_reporting_errors`)."""
    from gtalib.model.presets import PRESETS

    ap = subparsers.add_parser(
        "decode", help="tensor-parallel decode of a small model, checked against one process",
        description="Decode a small random model at one tensor-parallel degree (gloo ranks "
                    "spawned here, or one rank per process under torchrun), compare its logits "
                    "with the single-process model's, and print each rank's KV cache per token "
                    "and layer and the all-reduced bytes per token.",
        formatter_class=DefaultsFormatter)
    ap.add_argument("--variant", type=variant_name, default="mlra-4",
                    help="attention variant (any of gtalib train's; a TP degree it cannot take "
                         "is an error naming the allowed ones)")
    ap.add_argument("--tp", type=positive_int, default=None,
                    help="degree to spawn (gloo); omit under torchrun (WORLD_SIZE is used)")
    # the paper's 2.9 B model does not fit one machine's memory for a check like this
    ap.add_argument("--preset", default="ci", choices=[p for p in sorted(PRESETS) if p != "paper"],
                    help="model sizes (the paper preset's 2.9 B parameters are too large here)")
    ap.add_argument("--gate", action="store_true")
    ap.add_argument("--prompt", type=positive_int, default=16, help="prefill tokens")
    ap.add_argument("--steps", type=positive_int, default=8, help="decode steps after the prefill")
    ap.set_defaults(func=_decode_and_report)
    return ap


def _decode_and_report(a: argparse.Namespace) -> int:
    """Handler of ``gtalib decode`` for its parsed arguments ``a``."""
    import torch
    import torch.distributed as dist

    from gtalib.decode.tp import (
        allowed_tp_degrees,
        allreduce_bytes_per_token,
        decode_on_rank,
        rank_device,
        reference_decode,
        spawn_decode,
    )
    from gtalib.model.gpt import GPT
    from gtalib.model.kvcache import kv_elems_per_device
    from gtalib.model.presets import model_config

    torch.manual_seed(0)
    model = GPT(model_config(a.preset, a.variant, init="normal", gate=a.gate)).eval()
    if a.prompt + a.steps > model.cfg.block_size:
        raise ValueError(f"--prompt {a.prompt} + --steps {a.steps} tokens exceed the {a.preset} "
                         f"preset's block_size={model.cfg.block_size}")
    tokens = torch.randint(0, model.cfg.vocab_size, (1, a.prompt + a.steps))
    if "WORLD_SIZE" in os.environ and a.tp is None:  # under torchrun: this process is one rank
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
        rank, world = dist.get_rank(), dist.get_world_size()
        res = decode_on_rank({"m": model}, tokens, a.prompt, rank, world,
                             rank_device(backend, rank))
        results = [None] * world
        dist.all_gather_object(results, res)
        dist.destroy_process_group()
        if rank:
            return 0
    else:
        world = a.tp or 1
        results = spawn_decode({"m": model}, tokens, a.prompt, world)
    ref = reference_decode(model, tokens, a.prompt)
    T = tokens.shape[1]
    print(f"{model.cfg.variant} TP {world}: allowed degrees {allowed_tp_degrees(model.cfg)}")
    for r, res in enumerate(results):
        d = (res["m"]["logits"] - ref).abs().max().item()
        print(f"rank {r}: max |logits - single process| = {d:.2e}; cache elements/token/layer "
              f"{res['m']['kv_elems_per_token']} (kvcache: {kv_elems_per_device(model.cfg, world)}); "
              f"all-reduced {res['m']['reduced_bytes'] / T:.0f} bytes/token "
              f"(formula {allreduce_bytes_per_token(model.cfg, world)})")
    return 0
