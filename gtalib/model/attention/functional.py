"""The one causal attention op every variant calls, with GQA broadcasting and a cache offset.

All variants reduce to ``attend``: dense/GQA/MQA directly; MFA with one KV head; TPA and GTA after
assembling their keys/values from factors / tied states; the latent family per softmax branch
(and MQA-style over the latent cache in absorbed decode). One op means one place for the Triton
dispatch (``gtalib.kernels``) and one reference for the kernels' tests.

Two further entry points exist only so the Triton path can use its fused kernels; their torch
path is the same PyTorch attention as ``attend`` and stays the reference:

* :func:`attend_branches`: the latent family's ``α_o Σ_b`` softmax branches (training/prefill),
  one launch of ``kernels.mlra_attention`` on the Triton path.
* :func:`attend_latent`: absorbed attention over latent blocks (decode), one launch of
  ``kernels.latent_decode`` per block for a single new token on the Triton path.

``attend`` itself sends a single new token to ``kernels.gqa_decode`` (split-KV decoding) on the
Triton path. The decode kernels have no backward: they are used only when no gradient is needed
(``torch.no_grad()`` or inputs without ``requires_grad``); otherwise the differentiable fused
attention runs.
"""

from __future__ import annotations

import importlib

import torch
import torch.nn.functional as F

IMPLS = ("auto", "torch", "triton")
_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _kernels():
    """``gtalib.kernels`` (imported on first use: importing it defines the Triton kernels)."""
    return importlib.import_module("gtalib.kernels")


def resolve_impl(impl: str, x: torch.Tensor) -> str:
    """The implementation a call on ``x`` runs: ``"torch"`` or ``"triton"``.

    ``"auto"`` gives ``"triton"`` when ``x`` is a CUDA tensor of a kernel dtype (fp32/fp16/bf16)
    and ``gtalib.kernels`` imports, ``"torch"`` otherwise (on CPU the kernels only run in Triton's
    interpreter, 300–1000× slower: docs/environment.md). ``"triton"`` is honoured on any device (CPU
    needs ``TRITON_INTERPRET=1``, which the kernels check).

    Raises:
        ValueError: ``impl`` not in :data:`IMPLS`; or ``impl="triton"`` on CPU tensors when
            Triton's interpreter was not switched on before ``import torch``.
        ImportError: ``impl="triton"`` but ``gtalib.kernels`` (Triton) cannot be imported.
    """
    if impl not in IMPLS:
        raise ValueError(f"impl (ModelConfig.attn_impl) must be one of {IMPLS}, got {impl!r}")
    if impl == "torch":
        return "torch"
    if impl == "auto" and not (x.is_cuda and x.dtype in _KERNEL_DTYPES):
        return "torch"
    try:
        _kernels()
    except ImportError as err:
        if impl == "auto":
            return "torch"
        raise ImportError(
            f"impl='triton' (ModelConfig.attn_impl) needs the Triton kernels gtalib.kernels, which "
            f"failed to import ({err}); use attn_impl='torch' or 'auto'"
        ) from err
    if not x.is_cuda and not _kernels().INTERPRETER_USABLE:
        raise ValueError(
            "attn_impl='triton' on CPU tensors runs Triton's interpreter, which must be switched "
            "on before torch is imported: run with TRITON_INTERPRET=1 in the environment, or use "
            "attn_impl='torch' or 'auto'"
        )
    return "triton"


def _needs_grad(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _seqlens(batch: int, length: int, device) -> torch.Tensor:
    """``cache_seqlens`` of the decode kernels: every sequence holds ``length`` positions."""
    return torch.full((batch,), length, dtype=torch.int32, device=device)


def causal_mask(T: int, S: int, start_pos: int, device=None) -> torch.Tensor:
    """Boolean ``(T, S)`` mask, True where query ``i`` (absolute position ``start_pos + i``) may
    read key ``j`` (absolute position ``j``): ``j <= start_pos + i``."""
    qpos = torch.arange(start_pos, start_pos + T, device=device)[:, None]
    kpos = torch.arange(S, device=device)[None, :]
    return kpos <= qpos


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    start_pos: int = 0,
    impl: str = "torch",
) -> torch.Tensor:
    """Causal softmax attention ``softmax(scale · q kᵀ + mask) v`` with grouped KV heads.

    Args:
        q: ``(B, T, H, Dqk)`` queries of the T new tokens, at absolute positions
            ``start_pos .. start_pos + T - 1``.
        k: ``(B, S, Hkv, Dqk)`` keys at positions ``0 .. S-1`` (``S >= start_pos + T``; keys past
            a query's position are masked, so a preallocated cache may be passed whole).
        v: ``(B, S, Hkv, Dv)`` values.
        scale: softmax temperature, ``1/sqrt(D_qk)`` of the training model (docs/variants.md, "Shared
            model"; absorbed latent decode passes the training ``1/sqrt(d_n + d_r)``).
        start_pos: absolute position of the first query (cache length before this call).
        impl: ``"torch"`` (PyTorch SDPA, the reference; on CPU, values narrower than the keys
            are zero-padded so that its fused kernel runs, see :func:`_pad_values`), ``"triton"``
            (``gtalib.kernels.flash_attention``, same signature; a single new token without
            gradients goes to ``gtalib.kernels.gqa_decode``; on CPU only under
            ``TRITON_INTERPRET=1``, tiny shapes) or ``"auto"`` (see :func:`resolve_impl`: Triton
            when ``q`` is on CUDA and the kernels import, PyTorch otherwise).

    Returns:
        ``(B, T, H, Dv)``, in ``q``'s dtype. Query head ``h`` reads KV head ``h // (H // Hkv)``
        (``repeat_interleave`` semantics: heads h0,h0,h1,h1 for H=4, Hkv=2).

    Raises:
        ValueError: ``H`` not a multiple of ``Hkv``, mismatched shapes, ``S < start_pos + T``,
            or an unknown ``impl``.
        ImportError: ``impl="triton"`` without an importable ``gtalib.kernels``.
    """
    impl = resolve_impl(impl, q)
    _check_shapes(q.shape, k.shape, v.shape, start_pos)
    B, T, H, Dqk = q.shape
    Hkv = k.shape[2]
    if impl == "triton":
        if T == 1 and not _needs_grad(q, k, v):
            # split-KV decode over the keys this token sees (0 .. start_pos)
            out = _kernels().gqa_decode(q[:, 0], k, v, _seqlens(B, start_pos + 1, q.device), scale)
            return out.unsqueeze(1)  # (B, 1, H, Dv)
        return _kernels().flash_attention(q, k, v, scale, start_pos)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # (B, H|Hkv, T|S, D)
    out = _sdpa(qt, kt, _pad_values(vt, Dqk), scale, start_pos, enable_gqa=Hkv != H)
    return _unpad(out, v.shape[-1]).transpose(1, 2)  # (B, T, H, Dv)


def _check_shapes(q: torch.Size, k: torch.Size, v: torch.Size, start_pos: int) -> None:
    """The shape rules of :func:`attend` (its Raises), for ``(B, T|S, H|Hkv, D)`` shapes."""
    B, T, H, Dqk = q
    Bk, S, Hkv, Dk = k
    if k[:3] != v[:3] or Bk != B or Dk != Dqk:
        raise ValueError(f"shape mismatch: q {tuple(q)}, k {tuple(k)}, v {tuple(v)}")
    if H % Hkv:
        raise ValueError(f"query heads ({H}) must be a multiple of KV heads ({Hkv})")
    if S < start_pos + T:
        raise ValueError(f"keys cover {S} positions, queries need start_pos + T = {start_pos + T}")


def _pad_values(v: torch.Tensor, width: int) -> torch.Tensor:
    """``v (..., Dv)`` zero-padded to ``(..., width)`` where that lets PyTorch's fused attention run.

    The fused CPU kernel needs equal query/key and value widths; without it, unequal widths (the
    latent family's ``d_n + d_r`` keys, ``d_v`` values) fall back to the unfused "math" attention,
    which materialises every score and is slower (``benchmarks/attention_cpu.md``). The zero
    columns give zero outputs, which the caller slices off, so the result is the same attention.
    Left unpadded on CUDA (its fused kernels take unequal widths) and when the fused kernel is
    switched off (``torch.nn.attention.sdpa_kernel``), which ``gtalib/model/flops.py`` uses to count
    the unpadded work.
    """
    # flash_sdp_enabled is the global switch sdpa_kernel sets, for CPU too despite its name
    if v.shape[-1] >= width or v.is_cuda or not torch.backends.cuda.flash_sdp_enabled():
        return v
    return F.pad(v, (0, width - v.shape[-1]))


def _unpad(y: torch.Tensor, width: int) -> torch.Tensor:
    """``y`` without the zero columns :func:`_pad_values` added (a view; ``y`` itself if none)."""
    return y if y.shape[-1] == width else y[..., :width]


def _sdpa(qt, kt, vt, scale: float, start_pos: int, enable_gqa: bool = False) -> torch.Tensor:
    """PyTorch SDPA on ``(B, H, T, D)`` layouts with the causal mask of :func:`attend`."""
    T, S = qt.shape[2], kt.shape[2]
    if start_pos == 0 and S == T:
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale, enable_gqa=enable_gqa)
    mask = causal_mask(T, S, start_pos, device=qt.device)
    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale, enable_gqa=enable_gqa)


def attend_branches(
    q: torch.Tensor,
    k_nope: torch.Tensor,
    k_rope: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    alpha_o: float,
    start_pos: int = 0,
    impl: str = "torch",
) -> torch.Tensor:
    """Multi-branch causal attention of the latent family, ``α_o Σ_b attend(q, [k_n^b; k_r], v_b)``.

    Each branch has its own softmax (MLRA, arXiv 2603.02188, Sec. 4; docs/variants.md "The eleven
    variants": ``y = α_o Σ_b y_b``); MLA/GLA are the one-branch case. All branches share the query
    and the single RoPE key.

    Args:
        q: ``(B, T, H, d_n + d_r)`` queries, NoPE part first, RoPE already applied.
        k_nope: ``(NB, B, S, H, d_n)`` per-branch NoPE keys (any strides: a permuted view of a
            ``(B, S, NB, H, d_n)`` tensor is not copied on the Triton path).
        k_rope: ``(B, S, 1, d_r)`` the RoPE key shared by every head and branch.
        v: ``(NB, B, S, H, d_v)`` per-branch values.
        scale: softmax scale ``τ = 1/sqrt(d_n + d_r)``. alpha_o: branch-sum scale ``1/sqrt(NB)``.
        start_pos, impl: as in :func:`attend`.

    Returns:
        ``(B, T, H, d_v)`` in ``q``'s dtype.

    The torch path (the reference) is one PyTorch SDPA call per branch, the same attention as
    :func:`attend` (values zero-padded to the key width where that lets the fused CPU kernel run),
    with the RoPE key expanded to H heads; the Triton path is one
    ``gtalib.kernels.mlra_attention`` launch (fused forward, per-branch backward; its docstring
    states the accuracy).

    Raises:
        ValueError: as :func:`attend`; mismatched branch shapes; on the torch path, a query head
            count other than the branches' H. ImportError: as :func:`attend`.
    """
    NB, B, S, H, _ = k_nope.shape
    if NB < 1 or v.shape[:4] != k_nope.shape[:4] or k_rope.shape[:3] != (B, S, 1):
        raise ValueError(f"shape mismatch: k_nope {tuple(k_nope.shape)}, k_rope {tuple(k_rope.shape)}, "
                         f"v {tuple(v.shape)}; expected (NB, B, S, H, ·), (B, S, 1, ·), (NB, B, S, H, ·)")
    if resolve_impl(impl, q) == "triton":
        return _kernels().mlra_attention(q, k_nope, k_rope, v, scale, alpha_o, start_pos)
    # One SDPA call per branch on the shared query (no copy of q per branch); the padded
    # outputs are summed before the single slice back to d_v (padding: see _pad_values).
    if q.shape[2] != H:
        raise ValueError(f"query heads ({q.shape[2]}) must equal the branches' key heads ({H})")
    _check_shapes(q.shape, (B, S, H, k_nope.shape[-1] + k_rope.shape[-1]), v.shape[1:], start_pos)
    Dqk = q.shape[-1]
    qt = q.transpose(1, 2)  # (B, H, T, d_n + d_r)
    k_r = k_rope.transpose(1, 2).expand(B, H, S, k_rope.shape[-1])  # (B, H, S, d_r)
    # unbind, not indexing: autograd stacks the branches' gradients once, where k_nope[b] would
    # give each branch a zero-filled gradient of the whole (NB, ...) tensor.
    y = None
    for k_n, v_b in zip(k_nope.unbind(0), v.unbind(0)):
        k = torch.cat([k_n.transpose(1, 2), k_r], dim=-1)  # (B, H, S, d_n + d_r)
        y_b = _sdpa(qt, k, _pad_values(v_b.transpose(1, 2), Dqk), scale, start_pos)  # (B, H, T, ·)
        y = y_b if y is None else y + y_b
    y = _unpad(y, v.shape[-1]).transpose(1, 2)  # (B, T, H, d_v)
    return y if alpha_o == 1 else alpha_o * y


def attend_latent(
    q_lat: torch.Tensor,
    q_rope: torch.Tensor,
    c: torch.Tensor,
    k_rope: torch.Tensor,
    scale: float,
    start_pos: int = 0,
    impl: str = "torch",
) -> torch.Tensor:
    """Absorbed attention over latent blocks (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1.2; docs/variants.md
    "Decoding with a cache"): each of the ``G`` blocks is one KV head with key ``[c_j; k_r]`` and
    value ``c_j``; query head ``h`` reads block ``h // (H / G)``.

    Args:
        q_lat: ``(B, T, H, w)`` absorbed NoPE queries ``q_n W_UK[j]ᵀ``.
        q_rope: ``(B, T, H, d_r)`` rotated RoPE queries.
        c: ``(B, S, G, w)`` latent blocks (the cache's prefix; any strides).
        k_rope: ``(B, S, 1, d_r)`` the shared rotated RoPE key.
        scale: the training ``τ = 1/sqrt(d_n + d_r)``, not one derived from ``w``.
        start_pos, impl: as in :func:`attend`.

    Returns:
        ``(B, T, H, w)``, attention-weighted latents (apply ``W_UV`` afterwards).

    The torch path is :func:`attend` over the concatenated keys (the reference). On the Triton
    path a single new token without gradients runs ``gtalib.kernels.latent_decode`` once per block,
    reading each cached latent once for both the score and the value; prefill runs
    ``flash_attention`` through :func:`attend`.

    Raises:
        ValueError: ``H`` not a multiple of ``G``, and as :func:`attend`. ImportError: as :func:`attend`.
    """
    B, T, H, _ = q_lat.shape
    S, G = c.shape[1], c.shape[2]
    if H % G:
        raise ValueError(f"query heads ({H}) must be a multiple of latent blocks ({G})")
    impl = resolve_impl(impl, q_lat)
    if impl == "triton" and T == 1 and not _needs_grad(q_lat, q_rope, c, k_rope):
        Hg = H // G
        seqlens = _seqlens(B, start_pos + 1, q_lat.device)
        outs = [_kernels().latent_decode(q_lat[:, 0, j * Hg:(j + 1) * Hg], q_rope[:, 0, j * Hg:(j + 1) * Hg],
                                         c[:, :, j], k_rope[:, :, 0], seqlens, scale)  # (B, Hg, w)
                for j in range(G)]
        return torch.cat(outs, dim=1).unsqueeze(1)  # (B, 1, H, w)
    q = torch.cat([q_lat, q_rope], dim=-1)  # (B, T, H, w + d_r)
    k = torch.cat([c, k_rope.expand(B, S, G, k_rope.shape[-1])], dim=-1)  # (B, S, G, w + d_r)
    return attend(q, k, c, scale, start_pos, impl)
