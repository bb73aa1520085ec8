"""Probes of why the output gate does or does not help, measured on a fixed held-out batch.

Three quantities that Qiu et al. 2025 ("Gated Attention for Large Language Models", arXiv
2505.06708, Table 4) use to explain the gate's effect, measured per layer with one no-grad forward
of a trained :class:`gtalib.model.gpt.GPT` (docs/probes.md):

* ``gate_mean``: the mean gate score ``σ(x̃ W_g)`` (gated models only; Qiu et al.: 0.116, a
  sparse gate);
* ``first_token_share``: the attention probability on key position 0, the "attention sink"
  (Qiu et al.: 0.467 without the gate, 0.048 with it);
* ``max_abs_residual``: the largest ``|h|`` on the residual stream, their "massive activations"
  (Qiu et al.: 1053 without the gate, 94 with it).

The model code is not changed: the probe wraps the one PyTorch attention helper every variant's
training forward ends in (:func:`gtalib.model.attention.functional._sdpa`, reached from ``attend`` and,
once per softmax branch, from ``attend_branches``) and recomputes the probabilities from the
queries and keys that reach it; forward hooks read the gate and the block outputs.

``probes.json`` in a run folder holds :func:`measure`'s dict plus ``run_id``, ``variant`` and
``gate``; :func:`write_probes` writes it at the end of a run, :func:`probe_run` afterwards from a
kept checkpoint, ``gtalib probe RUN_FOLDER...`` from the command line.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

from gtalib.model.attention import functional
from gtalib.model.attention.functional import causal_mask
from gtalib.model.gpt import GPT
from gtalib.training.runs import (RunIncompleteError, RunSpec, default_datamodule, is_done, load_spec,
                                  write_atomic)

PROBES_FILE = "probes.json"


def _first_token_share(qt, kt, scale: float, start_pos: int, enable_gqa: bool) -> torch.Tensor:
    """Mean attention probability on key position 0 of one SDPA call, from its own arguments.

    ``qt (B, H, T, D)``, ``kt (B, Hkv, S, D)``, ``scale``, ``start_pos`` and ``enable_gqa`` as
    :func:`~gtalib.model.attention.functional._sdpa` receives them, so the softmax is SDPA's:
    ``softmax(scale · q kᵀ)`` under the causal mask of query ``i`` at absolute position
    ``start_pos + i``, query head ``h`` reading key head ``h // (H / Hkv)`` (SDPA's
    ``repeat_interleave`` rule). Averaged over batch, heads and the queries at absolute positions
    >= 1 (query 0 can only attend to key 0: its share is 1 whatever the model). A 0-d fp32 tensor.
    """
    if enable_gqa:
        kt = kt.repeat_interleave(qt.shape[1] // kt.shape[1], dim=1)  # (B, H, S, D)
    T, S = qt.shape[2], kt.shape[2]
    scores = scale * qt.float() @ kt.float().transpose(-1, -2)  # (B, H, T, S)
    scores = scores.masked_fill(~causal_mask(T, S, start_pos, qt.device), float("-inf"))
    p0 = torch.exp(scores[..., 0] - scores.logsumexp(-1))  # (B, H, T): probability on key 0
    return p0[..., max(0, 1 - start_pos):].mean()


@contextlib.contextmanager
def _recording(model: GPT):
    """For the duration of the block, record per layer what :func:`measure` reports.

    Yields ``{"gate": [...], "share": [...], "resid": [...]}``, one list per layer each, filled by
    every forward: the gate's mean (one value per forward), the first-token share of each SDPA
    call (one per softmax branch) and the block output's max ``|h|``. Every attention module runs
    its torch path meanwhile (the Triton kernels never reach ``_sdpa``; both compute the same
    function, ``attn_impl`` is not part of a run's result). Restores everything on exit.
    """
    n = len(model.blocks)
    rec = {"gate": [[] for _ in range(n)], "share": [[] for _ in range(n)],
           "resid": [[] for _ in range(n)]}
    current = {}  # {"layer": i} while layer i's attention runs: set by a pre-hook, read by the wrapper
    sdpa = functional._sdpa

    def probed_sdpa(qt, kt, vt, scale, start_pos, enable_gqa=False):
        rec["share"][current["layer"]].append(_first_token_share(qt, kt, scale, start_pos, enable_gqa))
        return sdpa(qt, kt, vt, scale, start_pos, enable_gqa=enable_gqa)

    hooks, impls = [], {}
    try:
        for i, blk in enumerate(model.blocks):
            attn = blk.attn
            impls[attn] = attn.impl
            attn.impl = "torch"
            hooks.append(attn.register_forward_pre_hook(lambda m, args, i=i: current.update(layer=i)))
            if attn.g_proj is not None:  # g_proj's output is the gate's logit x̃ W_g
                hooks.append(attn.g_proj.register_forward_hook(
                    lambda m, args, out, i=i: rec["gate"][i].append(torch.sigmoid(out.float()).mean())))
            hooks.append(blk.register_forward_hook(
                lambda m, args, out, i=i: rec["resid"][i].append(out.abs().amax().float())))
        functional._sdpa = probed_sdpa
        yield rec
    finally:
        functional._sdpa = sdpa
        for h in hooks:
            h.remove()
        for attn, impl in impls.items():
            attn.impl = impl


def measure(model: GPT, idx: torch.Tensor) -> dict:
    """The gate probes of one no-grad forward of ``model`` on ``idx`` (module docstring).

    Args:
        model: a :class:`gtalib.model.gpt.GPT` (any variant, gated or not), on any device; run in eval
            mode (restored afterwards) in its parameters' dtype (autocast off).
        idx: ``(B, T)`` token ids, moved to the model's device.

    Returns:
        A JSON-serialisable dict, lists indexed by layer (``n_layer`` entries):

        * ``gate_mean``: mean of ``σ(x̃ W_g)`` over batch, positions, heads and channels
          (the gate of :meth:`gtalib.model.attention.base.Attention.project_out`, in (0, 1));
          ``None`` for an ungated model. Qiu et al. 2025's "gate score".
        * ``first_token_share``: attention probability on key position 0, averaged over heads,
          batch and query positions >= 1 (query 0 attends only to itself), and for MLRA-2/-4
          over the softmax branches, each counted once (their outputs are summed after the
          softmax). MLA/GLA have one softmax per head (GLA's head groups only share latents),
          so the head average covers them. In [0, 1]; uniform causal attention gives
          ``mean_{i=1}^{T-1} 1/(i+1)``. Qiu et al.'s first-token attention score.
        * ``max_abs_residual``: max ``|h|`` over batch, positions and channels of each block's
          output hidden state ``h`` (the residual stream after the block, before the final
          RMSNorm); ``max_abs_residual_overall`` the max over layers. In the units of ``h``
          (the embedding has ``init_std`` 0.02). Qiu et al.'s "massive activations".
        * ``n_layer``; ``batch``: ``{"windows": B, "tokens_per_window": T}``.

    Raises:
        RuntimeError: a layer's attention did not reach the probed SDPA helper (a path the probe
            does not know).
    """
    was_training = model.training
    model.eval()
    try:
        device = model.wte.weight.device
        with torch.no_grad(), torch.autocast(device.type, enabled=False), _recording(model) as rec:
            model(idx.to(device))
    finally:
        model.train(was_training)
    if not all(rec["share"]):
        raise RuntimeError("an attention layer did not call gtalib.model.attention.functional._sdpa; "
                           "the first-token probe does not cover its path")
    gated = all(rec["gate"])
    resid = [float(max(r)) for r in rec["resid"]]
    return {
        "n_layer": len(model.blocks),
        "gate_mean": [float(torch.stack(g).mean()) for g in rec["gate"]] if gated else None,
        "first_token_share": [float(torch.stack(s).mean()) for s in rec["share"]],
        "max_abs_residual": resid,
        "max_abs_residual_overall": max(resid),
        "batch": {"windows": idx.shape[0], "tokens_per_window": idx.shape[1]},
    }


def fixed_batch(spec: RunSpec, n_windows: int = 8, data_dir=None) -> torch.Tensor:
    """The held-out batch the probes use: ``(n_windows, seq_len)`` int64 token ids.

    The validation windows of ``spec``'s corpus, as the run's validation loss reads them
    (:func:`gtalib.training.runs.default_datamodule`: ``eval_windows`` evenly spaced windows per source),
    taken in turn from each source (window 0 of every source in manifest order, then window 1,
    ...), the first ``n_windows`` of them; the inputs ``window[:-1]``. Deterministic: the same for
    every run of the same ``spec.data`` (corpus, ``seq_len``, ``eval_windows``), so both arms of
    an ablation are measured on the same tokens.

    Raises:
        ValueError: ``n_windows`` outside 1 .. (validation windows of all sources); or as
            :func:`gtalib.training.runs.default_datamodule`.
    """
    dm = default_datamodule(spec, data_dir)
    per_source = [torch.cat([x for x, _ in loader]) for loader in dm.val_dataloader()]  # (W, T) each
    windows = torch.stack(per_source, dim=1).flatten(0, 1)  # (W * sources, T), sources in turn
    if not 1 <= n_windows <= len(windows):
        raise ValueError(f"n_windows must be in 1..{len(windows)} (the validation windows of "
                         f"{len(per_source)} sources), got {n_windows}")
    return windows[:n_windows]


def write_probes(path, model: GPT, spec: RunSpec, data_dir=None) -> dict:
    """Measure ``model`` (the run's final weights) on :func:`fixed_batch` of ``spec`` and write
    ``path/probes.json`` atomically (:func:`gtalib.training.runs.write_atomic`). Returns what it wrote:
    :func:`measure`'s dict plus ``run_id``, ``variant`` and ``gate``.

    Raises:
        ValueError: ``spec.data`` does not name a corpus (:func:`gtalib.training.runs.default_datamodule`).
    """
    probes = {"run_id": spec.run_id, "variant": spec.model.variant, "gate": spec.model.gate,
              **measure(model, fixed_batch(spec, data_dir=data_dir))}
    write_atomic(Path(path) / PROBES_FILE, json.dumps(probes, indent=2, sort_keys=True) + "\n")
    return probes


def probe_run(run_folder, data_dir=None) -> dict:
    """:func:`write_probes` for a finished run whose checkpoint was kept, from its final weights
    (``run_folder/checkpoints/last.ckpt``, loaded weights-only on the CPU). Returns the probes.

    Raises:
        RunIncompleteError: the run has no ``DONE`` (its checkpoint is not the final weights).
        FileNotFoundError: no such folder, no ``spec.json``, or no single-file
            ``checkpoints/last.ckpt`` (the run must be trained with its checkpoint kept).
    """
    path = Path(run_folder)
    if not path.is_dir():
        raise FileNotFoundError(f"run folder {path}: no such folder")
    spec = load_spec(path)
    if not is_done(path):
        raise RunIncompleteError(f"run {path} is not finished (no DONE file): its checkpoint does "
                                 f"not hold the final weights")
    ckpt = path / "checkpoints" / "last.ckpt"
    if not ckpt.is_file():
        raise FileNotFoundError(f"run {path} has no {ckpt.relative_to(path)}: probes need the final "
                                f"weights, so the run must be trained with its checkpoint kept "
                                f"(gtalib train --keep-checkpoint, ensure_run(..., keep_checkpoint=True))")
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    model = GPT(spec.model)
    # LitGPT holds the GPT as its ``model`` attribute, hence the key prefix
    model.load_state_dict({k.removeprefix("model."): v for k, v in state.items()})
    return write_probes(path, model, spec, data_dir)
