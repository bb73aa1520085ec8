"""The model on the Triton path (``attn_impl="triton"``) against the PyTorch path (the reference).

Two GPTs share their weights and differ only in ``attn_impl``; on CPU the kernels run in Triton's
interpreter (tests/conftest.py sets ``TRITON_INTERPRET=1``), on CUDA natively. Checked per variant:
logits and every parameter gradient of a training step, and prefill + token-by-token decode on the
Triton path (fused MLRA attention, ``latent_decode`` / ``gqa_decode``) against the cache-free
PyTorch forward of the whole sequence (every registered variant). Also: ``"auto"`` picks PyTorch
for CPU tensors, and an impossible ``"triton"`` request raises.

Tolerance: the kernels' RMSE-ratio criterion (:mod:`gtalib.kernels.tolerance`), fp32 bound 1e-5
on logits and gradients (observed here: ≈ 3e-7 on logits, ≤ 1.1e-6 on gradients). Sizes: the
``ci`` preset (d_model 128, 2 layers, 4 heads, head_dim 32, latent 128) at T ≤ 9, so the
interpreter stays within seconds per case.
"""

import sys

import pytest
import torch

pytest.importorskip("triton")
kernels = pytest.importorskip("gtalib.kernels")

from gtalib.model.attention import functional  # noqa: E402
from gtalib.model.attention.functional import attend, resolve_impl  # noqa: E402
from gtalib.model.gpt import GPT  # noqa: E402

from .helpers import tiny_cfg  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# MLRA-4 runs gated only: the gate multiplies the attention output, so the gated model exercises
# everything the ungated one does, and each MLRA-4 case costs ~10 s in the interpreter.
CASES = [("mha", {}), ("gqa", {}), ("mla", {}), ("gla-2", {}), ("mlra-2", {}), ("mlra-4", {"gate": True})]
IDS = [v + "".join(f"-{k}" for k in o) for v, o in CASES]
# decode reaches the kernels through attend / attend_latent for every variant: cover the rest too
DECODE_CASES = CASES + [(v, {}) for v in ("mqa", "mfa", "tpa", "gta", "gla-4")]
DECODE_IDS = IDS + ["mqa", "mfa", "tpa", "gta", "gla-4"]
# blocks of the latent cache each decoded token reads with one latent_decode launch per layer
LATENT_BLOCKS = {"mla": 1, "gla-2": 2, "gla-4": 4, "mlra-2": 4, "mlra-4": 4}


def twin_models(variant: str, options: dict) -> tuple[GPT, GPT]:
    """``(torch model, triton model)`` with identical random weights (``init="normal"``, so W_O is
    not zero and the attention reaches the logits), fp32."""
    torch.manual_seed(0)
    ref = GPT(tiny_cfg(variant, attn_impl="torch", **options)).to(DEVICE)
    tri = GPT(tiny_cfg(variant, attn_impl="triton", **options)).to(DEVICE)
    tri.load_state_dict(ref.state_dict())
    return ref, tri


def count_calls(monkeypatch, name: str) -> list:
    """Replace ``gtalib.kernels.<name>`` by a pass-through that records each call."""
    calls, fn = [], getattr(kernels, name)

    def spy(*args, **kwargs):
        calls.append(name)
        return fn(*args, **kwargs)

    monkeypatch.setattr(kernels, name, spy)
    return calls


@pytest.mark.parametrize("variant,options", CASES, ids=IDS)
def test_training_step_matches_torch(variant, options, monkeypatch):
    """Same logits, loss and parameter gradients on both paths; the latent family goes through
    one fused ``mlra_attention`` launch per layer, the others through ``flash_attention``."""
    ref, tri = twin_models(variant, options)
    fused = count_calls(monkeypatch, "mlra_attention" if variant in LATENT_BLOCKS else "flash_attention")
    idx = torch.randint(0, ref.cfg.vocab_size, (2, 9), device=DEVICE)
    logits_ref, loss_ref = ref(idx, idx)
    logits_tri, loss_tri = tri(idx, idx)
    assert len(fused) == ref.cfg.n_layer
    kernels.assert_rmse_close(logits_tri, logits_ref, torch.float32, "logits")
    torch.testing.assert_close(loss_tri, loss_ref, atol=1e-5, rtol=1e-5)
    loss_ref.backward()
    loss_tri.backward()
    grads_tri = dict(tri.named_parameters())
    for name, p in ref.named_parameters():
        kernels.assert_rmse_close(grads_tri[name].grad, p.grad, torch.float32, f"grad of {name}")


@pytest.mark.parametrize("variant,options", DECODE_CASES, ids=DECODE_IDS)
def test_prefill_and_decode_match_full_forward(variant, options, monkeypatch):
    """Triton prefill of 5 tokens, then 2 single-token steps through the decode kernels, equals
    the PyTorch forward of all 7 tokens without a cache. The cache is filled with NaN first, so a
    read of a not-yet-written position would show up."""
    ref, tri = twin_models(variant, options)
    decode = count_calls(monkeypatch, "latent_decode" if variant in LATENT_BLOCKS else "gqa_decode")
    T0, T = 5, 7
    idx = torch.randint(0, ref.cfg.vocab_size, (2, T), device=DEVICE)
    with torch.no_grad():
        full, _ = ref(idx)
        cache = tri.new_cache(2, T)
        for layer in cache["layers"]:
            for t in layer.values():
                if torch.is_tensor(t):
                    t.fill_(float("nan"))
        steps = [tri.forward_cached(idx[:, :T0], cache)]
        steps += [tri.forward_cached(idx[:, t : t + 1], cache) for t in range(T0, T)]
    kernels.assert_rmse_close(torch.cat(steps, dim=1), full, torch.float32, "cached logits")
    launches = LATENT_BLOCKS.get(variant, 1)  # per layer and decoded token
    assert len(decode) == (T - T0) * ref.cfg.n_layer * launches


def test_single_token_with_gradients_uses_the_differentiable_kernel(monkeypatch):
    """The decode kernels have no backward: a one-token call that needs gradients must take
    ``flash_attention`` and give the PyTorch gradients."""
    decode = count_calls(monkeypatch, "gqa_decode")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, n, h, 12, generator=g).to(DEVICE).requires_grad_()
               for n, h in ((1, 4), (6, 2), (6, 2)))
    out_tri = attend(q, k, v, 0.3, start_pos=5, impl="triton")
    grads_tri = torch.autograd.grad(out_tri.square().sum(), (q, k, v))
    out_ref = attend(q, k, v, 0.3, start_pos=5, impl="torch")
    grads_ref = torch.autograd.grad(out_ref.square().sum(), (q, k, v))
    assert decode == []
    kernels.assert_rmse_close(out_tri, out_ref, torch.float32)
    for a, b in zip(grads_tri, grads_ref):
        kernels.assert_rmse_close(a, b, torch.float32, "gradient")


def test_auto_uses_torch_on_cpu(monkeypatch):
    """``attn_impl="auto"`` on CPU tensors runs PyTorch: no kernel is called, even though the
    kernels import here (the interpreter would be 300-1000x slower)."""
    x = torch.zeros(1, 2, 4, 8)
    assert resolve_impl("auto", x) == "torch"
    calls = [count_calls(monkeypatch, n) for n in ("flash_attention", "mlra_attention", "latent_decode")]
    torch.manual_seed(0)
    model = GPT(tiny_cfg("mlra-2", attn_impl="auto"))
    idx = torch.randint(0, model.cfg.vocab_size, (1, 4))
    with torch.no_grad():
        model(idx)
        cache = model.new_cache(1, 5)
        model.forward_cached(idx, cache)
        model.forward_cached(idx[:, :1], cache)
    assert calls == [[], [], []]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_auto_uses_triton_on_cuda():
    assert resolve_impl("auto", torch.zeros(1, device="cuda")) == "triton"
    assert resolve_impl("auto", torch.zeros(1, device="cuda", dtype=torch.float64)) == "torch"


def test_triton_without_kernels_raises_and_auto_falls_back(monkeypatch):
    """A ``None`` entry in ``sys.modules`` makes ``import gtalib.kernels`` fail, as a missing or
    broken Triton would."""
    monkeypatch.setitem(sys.modules, "gtalib.kernels", None)
    x = torch.zeros(1, 2, 4, 8)
    with pytest.raises(ImportError, match="attn_impl='torch'"):
        resolve_impl("triton", x)
    assert resolve_impl("auto", x) == "torch"
    model = GPT(tiny_cfg("mla", attn_impl="triton"))
    with pytest.raises(ImportError, match="impl='triton'"):
        model(torch.zeros(1, 3, dtype=torch.long))


def test_unknown_impl_raises_naming_the_choices():
    with pytest.raises(ValueError, match="auto"):
        resolve_impl("cuda", torch.zeros(1))
    with pytest.raises(ValueError, match="impl"):
        functional.attend_branches(torch.zeros(1, 2, 4, 8), torch.zeros(1, 1, 2, 4, 6),
                                   torch.zeros(1, 2, 1, 2), torch.zeros(1, 1, 2, 4, 6),
                                   1.0, 1.0, impl="gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter check applies without CUDA")
def test_triton_on_cpu_without_interpreter_is_a_clear_error():
    """torch imports triton on `import torch`, so TRITON_INTERPRET set later cannot take effect:
    attn_impl='triton' on CPU must then say so instead of failing inside the interpreter."""
    import os
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from gtalib.model.gpt import GPT\n"
        "from gtalib.model.presets import model_config\n"
        "m = GPT(model_config('ci', 'mla', attn_impl='triton'))\n"
        "try:\n"
        "    m(torch.zeros(1, 4, dtype=torch.long))\n"
        "except ValueError as e:\n"
        "    print('VALUEERROR', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert "VALUEERROR" in out.stdout and "TRITON_INTERPRET=1" in out.stdout, out.stderr[-2000:]
