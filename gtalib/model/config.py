"""Model configuration, variant names and the rules that derive every variant's sizes.

One frozen dataclass, :class:`ModelConfig`, describes a model. Variant-specific sizes (KV heads,
latent ranks, RoPE width, TPA ranks, MFA head width) are derived from the paper's ratios by
:meth:`ModelConfig.resolved` unless given explicitly, so a preset only types the shared sizes.

Sources: ``docs/variants.md`` (MLRA paper, arXiv 2603.02188, Sec. 4 and App. B; the
authors' released configuration).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass

from gtalib.model.user_variants import check_path, is_user_variant

#: Canonical variant names, in the paper's table order.
VARIANTS: tuple[str, ...] = (
    "mha", "mqa", "gqa", "mla", "mfa", "tpa", "gla-2", "gla-4", "gta", "mlra-2", "mlra-4",
)
#: Display names as printed in the paper.
DISPLAY_NAMES: dict[str, str] = {v: v.upper() for v in VARIANTS}

LATENT_VARIANTS = ("mla", "gla-2", "gla-4", "mlra-2", "mlra-4")
#: Variant-specific sizes: ``None`` means "derive", and :meth:`ModelConfig.resolved` refuses a
#: typed value the variant does not use.
VARIANT_SIZES = ("n_kv_head", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
                 "qk_nope_head_dim", "v_head_dim")
INIT_CHOICES = ("zero", "normal", "scaled")
ATTN_IMPLS = ("auto", "torch", "triton")


#: Latent layout per variant: (latent blocks, softmax branches, disjoint query-head groups).
#: docs/variants.md: GLA-2 block j feeds heads [jH/2, (j+1)H/2); MLRA-2 branch A uses blocks 0/1 for
#: the two head halves, branch B blocks 2/3; MLRA-4 every block feeds all heads.
LATENT_LAYOUT: dict[str, tuple[int, int, int]] = {
    "mla": (1, 1, 1), "gla-2": (2, 1, 2), "gla-4": (4, 1, 4), "mlra-2": (4, 2, 2), "mlra-4": (4, 4, 1),
}


def check_int(owner: str, name: str, value, minimum: int, optional: bool = False) -> None:
    """Accept only an ``int`` of at least ``minimum`` (``bool`` and ``float`` are refused), or
    ``None`` when ``optional``.

    Raises:
        ValueError: ``"<owner>.<name> must be an integer >= <minimum>, got <value>"``.
    """
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        what = f"an integer >= {minimum}" + (" or None" if optional else "")
        raise ValueError(f"{owner}.{name} must be {what}, got {value!r} ({type(value).__name__})")


def check_bool(owner: str, name: str, value) -> None:
    """Refuse anything but ``True``/``False`` (``"yes"``, ``1`` and ``None`` included).

    Raises:
        ValueError: ``"<owner>.<name> must be True or False, got <value>"``.
    """
    if not isinstance(value, bool):
        raise ValueError(f"{owner}.{name} must be True or False (a bool), got {value!r} "
                         f"({type(value).__name__})")


def check_number(owner: str, name: str, value, low: float, high: float = float("inf"),
                 low_open: bool = False, high_open: bool = False) -> None:
    """Refuse anything but a finite ``int``/``float`` (not ``bool``, not NaN) in the interval from
    ``low`` to ``high`` (``*_open``: that end excluded).

    Raises:
        ValueError: naming ``<owner>.<name>``, the interval and the value.
    """
    import math

    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        close = ")" if high_open or math.isinf(high) else "]"
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{close}"
        raise ValueError(f"{owner}.{name} must be a finite number in {interval}, got {value!r} "
                         f"({type(value).__name__})")


def _round8(x: float) -> int:
    """Nearest multiple of 8, at least 8 (used for derived query ranks such as d_model/3)."""
    return max(8, 8 * int(x / 8 + 0.5))


def residual_init_scale(n_layer: int) -> float:
    """The factor ``1/√(2·n_layer)`` that ``init="scaled"`` applies to the N(0, σ) draw of every
    residual-branch output projection (attention ``W_O`` and MLP ``W_down``): GPT-2 (Radford et
    al. 2019, §2.3) scales residual layers by 1/√N with N the number of residual branches, two
    per block here.

    Raises:
        ValueError: ``n_layer`` not a positive integer.
    """
    if not isinstance(n_layer, int) or isinstance(n_layer, bool) or n_layer <= 0:
        raise ValueError(f"n_layer must be a positive integer, got {n_layer!r}")
    return 1.0 / math.sqrt(2 * n_layer)


def canonical_variant(name: str) -> str:
    """Map a user-typed variant name (any case, ``_`` or ``-``: ``MLRA_4``, ``mlra4``) to its
    canonical form (``mlra-4``); a user's own variant, named by import path
    (``"module.path:ClassName"``, :mod:`gtalib.model.user_variants`), is kept as typed.

    Raises:
        KeyError: unknown name, or an import path of another form; the message lists the
            allowed variants.
    """
    if not isinstance(name, str):
        raise KeyError(f"variant must be a string, one of {', '.join(VARIANTS)}; got {name!r}")
    if is_user_variant(name):
        return check_path(name)
    key = name.strip().lower().replace("_", "-")
    if key not in VARIANTS and key[-1:].isdigit() and "-" not in key:
        key = key[:-1] + "-" + key[-1]  # "mlra4" -> "mlra-4"
    if key not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; allowed: {', '.join(VARIANTS)}, or an import "
                       f"path 'module.path:ClassName'")
    return key


def parent_variant(path: str) -> str | None:
    """The built-in variant whose sizes the user's class at ``path`` resolves as: ``None`` for a
    class that starts from ``Attention`` itself (it reads only the sizes it is given), else the
    variant of its nearest built-in ancestor (``DenseAttention`` → ``mha``, ``LatentAttention``
    → ``mla``, ``TPAttention`` → ``tpa``, ``GTAttention`` → ``gta``, ``MFAttention`` → ``mfa``;
    the first name :func:`gtalib.model.attention.base.register` gave it), or another variant of
    that ancestor that the class declares as ``base_variant`` (``base_variant = "gqa"`` on a
    ``DenseAttention`` subclass).

    Raises:
        ValueError: the class cannot be taken (:func:`gtalib.model.user_variants.variant_class`), or declares a
            ``base_variant`` its built-in ancestor does not build (the message lists those it
            does).
    """
    from gtalib.model.user_variants import variant_class

    cls = variant_class(path)
    base = sys.modules["gtalib.model.attention.base"]  # loaded: cls subclasses its Attention
    builtin = next((c for c in cls.__mro__ if c in base.REGISTRY.values()), None)
    if builtin is None:
        return None
    names = [n for n, c in base.REGISTRY.items() if c is builtin]
    declared = getattr(cls, "base_variant", None)
    try:
        name = canonical_variant(declared) if isinstance(declared, str) else None
    except KeyError:
        name = None
    if name not in names:
        raise ValueError(f"variant {path!r}: base_variant {declared!r} is not a variant its "
                         f"parent {builtin.__name__} builds; allowed: {', '.join(names)}")
    return name


def _importable(path: str) -> bool:
    """Whether the user's class at ``path`` imports here
    (:func:`gtalib.model.user_variants.variant_class`)."""
    from gtalib.model.user_variants import variant_class

    try:
        variant_class(path)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class ModelConfig:
    """Everything that determines a model's architecture and initialisation.

    Shared sizes (every variant):
        variant: canonical name from :data:`VARIANTS` (any spelling accepted by
            :func:`canonical_variant`), or a user's own variant by import path
            (``"module.path:ClassName"``, :mod:`gtalib.model.user_variants`).
        variant_source: for a user's variant, the sha256 of its class's source
            (:func:`gtalib.model.user_variants.source_hash`; filled on construction, kept when
            given, as by a stored spec); ``None`` for the built-in variants.
        n_layer, d_model, n_head, head_dim: depth, width, query heads, per-head width ``d_h``.
        vocab_size: tokens in the (tied) embedding.
        block_size: longest sequence in tokens (size of the RoPE table).
        intermediate_size: SwiGLU width F; ``None`` means "solve by parameter matching against
            the MHA model of the same shared sizes" (:func:`gtalib.model.params.match_intermediate_size`).

    Variant sizes (``None`` = derive from the paper's ratios in :meth:`resolved`):
        n_kv_head: KV heads of GQA/GTA (``n_head // gqa_group``); 1 for MQA; ``n_head`` for MHA.
        gqa_group: query heads per KV head for GQA/GTA at ``head_multiplier == 1`` (paper: 4).
        kv_lora_rank: latent width ``d_c`` of the latent family (paper: ``4 * head_dim`` = 512).
        q_lora_rank: query latent ``d_q`` (paper: ``d_model / 2`` for MLA, ``d_model / 3`` for
            GLA/MLRA, ``2 d_model / 3`` for MFA's query bottleneck).
        qk_rope_head_dim: decoupled RoPE width ``d_r`` (paper: ``head_dim / 2`` = 64).
        qk_nope_head_dim: ``d_n`` (paper: ``head_dim``).
        v_head_dim: value width per head (paper: ``head_dim``; MFA: ``2 * head_dim``).
        tpa_q_rank, tpa_rank: TPA's ``R_q`` and ``R`` (paper: 6 and 2).

    Ablation options (docs/variants.md, "Ablation switches"):
        init: ``"zero"`` (W_O and W_down exactly zero), ``"normal"`` (N(0, init_std)) or
            ``"scaled"`` (W_O and W_down N(0, init_std/√(2·n_layer)), GPT-2's residual scaling,
            Radford et al. 2019, §2.3: 1/√N for N = 2·n_layer residual branches).
        gate: sigmoid output gate before W_O.
        latent_scale: the α_q, α_kv, α_o constants of the latent family (MLA/GLA/MLRA only).
        head_multiplier: 1, or 2 for the double-heads ablation (GQA, MLA, GLA-2 in the paper;
            per-head dims and KV cache unchanged; :meth:`resolved` folds it into ``n_head``; MHA
            and TPA refuse it because their cache grows with the heads).

    Other:
        rope_theta: RoPE base (10000). init_std: σ = 0.02. attn_impl: ``"auto"`` (Triton on CUDA,
        PyTorch elsewhere), ``"torch"`` or ``"triton"``. tie_embeddings: always true in the paper.

    Raises:
        KeyError: unknown ``variant`` (lists the allowed names).
        ValueError: naming the field: a size that is not a positive ``int`` (``bool``/``float``
            refused; variant sizes and ``intermediate_size`` may be ``None``), ``gate`` or
            ``latent_scale`` not a ``bool`` (``"yes"``, ``1`` refused), ``rope_theta``/``init_std``
            not a finite positive number, ``init``/``attn_impl``/``head_multiplier`` not one of
            the allowed values, ``latent_scale=False`` on a variant without latent scales; for a
            user's variant (``"module:Class"``), one line saying why its class cannot be taken
            (:func:`gtalib.model.user_variants.variant_class`).
    """

    variant: str = "mha"
    n_layer: int = 2
    d_model: int = 128
    n_head: int = 4
    head_dim: int = 32
    vocab_size: int = 256
    block_size: int = 128
    intermediate_size: int | None = None

    n_kv_head: int | None = None
    gqa_group: int = 4
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    tpa_q_rank: int = 6
    tpa_rank: int = 2

    init: str = "zero"
    gate: bool = False
    latent_scale: bool = True
    head_multiplier: int = 1

    rope_theta: float = 10000.0
    init_std: float = 0.02
    attn_impl: str = "auto"
    variant_source: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "variant", canonical_variant(self.variant))
        if is_user_variant(self.variant):
            if self.variant_source is None:  # a new config: import the class and hash it
                from gtalib.model.user_variants import source_hash, variant_class

                object.__setattr__(self, "variant_source", source_hash(variant_class(self.variant)))
        elif self.variant_source is not None:
            raise ValueError(f"variant_source applies to a user's variant ('module:Class') only; "
                             f"variant {self.variant!r} is built in: leave it None")
        for name in ("n_layer", "d_model", "n_head", "head_dim", "vocab_size", "block_size",
                     "gqa_group", "tpa_q_rank", "tpa_rank"):
            check_int("ModelConfig", name, getattr(self, name), 1)
        for name in ("intermediate_size", *VARIANT_SIZES):
            check_int("ModelConfig", name, getattr(self, name), 1, optional=True)
        for name in ("gate", "latent_scale"):
            check_bool("ModelConfig", name, getattr(self, name))
        check_number("ModelConfig", "rope_theta", self.rope_theta, 0, low_open=True)
        check_number("ModelConfig", "init_std", self.init_std, 0, low_open=True)
        if self.init not in INIT_CHOICES:
            raise ValueError(f"init must be one of {INIT_CHOICES}, got {self.init!r}")
        if self.head_multiplier not in (1, 2) or type(self.head_multiplier) is not int:
            raise ValueError(f"head_multiplier must be 1 or 2, got {self.head_multiplier!r}")
        if self.attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {self.attn_impl!r}")
        if not self.latent_scale and self.builtin_variant not in LATENT_VARIANTS:
            raise ValueError(
                f"latent_scale=False only applies to {', '.join(LATENT_VARIANTS)}; "
                f"variant {self.variant!r} has no latent scale"
            )

    # ------------------------------------------------------------------ derivation rules
    @property
    def builtin_variant(self) -> str | None:
        """The built-in variant whose rules this config follows: ``variant`` itself, or for a
        user's class the variant of the built-in class it subclasses
        (:func:`parent_variant`; ``None`` for a class that starts from ``Attention``).

        Raises:
            ValueError: a user's class that cannot be taken (:func:`parent_variant`).
        """
        return parent_variant(self.variant) if is_user_variant(self.variant) else self.variant

    @property
    def latent_blocks(self) -> int:
        """Number of latent blocks ``d_c`` is split into (MLA 1, GLA-2 2, GLA-4/MLRA-2/MLRA-4 4);
        0 for variants without a latent."""
        return LATENT_LAYOUT.get(self.builtin_variant, (0, 0, 0))[0]

    @property
    def latent_branches(self) -> int:
        """Attention branches summed outside the softmax (MLRA-2 2, MLRA-4 4, else 1)."""
        return LATENT_LAYOUT.get(self.builtin_variant, (0, 1, 0))[1]

    @property
    def latent_head_groups(self) -> int:
        """Disjoint query-head groups, each fed by its own latent block(s) (GLA-2 2, GLA-4 4,
        MLRA-2 2, MLA/MLRA-4 1); 0 for variants without a latent."""
        return LATENT_LAYOUT.get(self.builtin_variant, (0, 0, 0))[2]

    def resolved(self) -> "ModelConfig":
        """Fill every size the variant uses from the paper's ratios; validate; fold the head
        multiplier into ``n_head``.

        Rules (docs/variants.md, "The eleven variants" and "Ablation switches"; sizes typed explicitly
        are kept, then validated):

        - Double heads: ``n_head ← n_head · head_multiplier`` with per-head dims unchanged; the
          result has ``head_multiplier = 1`` (so ``resolved`` is idempotent and two spellings of
          the same architecture resolve equal). KV heads and latents are those of the 1× model.
        - ``n_kv_head``: MHA ``n_head``; MQA and MFA 1; GQA/GTA ``n_head_1x // gqa_group`` (paper
          24 / 4 = 6; double heads keep 6, so the group becomes 8); ``gqa_group`` is rewritten to
          the effective ``n_head / n_kv_head``. TPA and the latent family: ``None`` (no KV heads).
        - Latent family (MLA, GLA-2/4, MLRA-2/4): ``kv_lora_rank = 4·head_dim`` (512),
          ``qk_rope_head_dim = head_dim / 2`` (64), ``qk_nope_head_dim = head_dim`` (128),
          ``v_head_dim = head_dim``; ``q_lora_rank`` = ``d_model/2`` for MLA (1536), ``d_model/3``
          for GLA/MLRA (1024).
        - MFA: ``q_lora_rank = 2·d_model/3`` (2048), ``v_head_dim = 2·head_dim`` (256, also the
          q/k width; RoPE over all of it).
        - GTA: ``qk_rope_head_dim = head_dim / 2`` (64), ``qk_nope_head_dim = head_dim − d_r``
          (64; the tied part ``s_t``), ``v_head_dim = head_dim``.
        - MHA/MQA/GQA/TPA: ``v_head_dim = head_dim``, RoPE over the full head.
        - ``q_lora_rank`` is rounded to the nearest multiple of 8 (at least 8): exact at paper
          width (1536, 1024, 2048); at d_model 128 it gives 64 (MLA), 40 (GLA/MLRA), 88 (MFA).
        - Sizes a variant does not use are ``None``; typing one raises (see below).

        A user's class (``"module:Class"``) that subclasses a built-in class resolves as its
        parent's variant (:attr:`builtin_variant`); one that starts from ``Attention`` is kept
        as given (it reads the sizes it needs).

        Raises:
            ValueError: naming the parameter, when heads do not divide into groups / KV heads /
                latent head groups, ``kv_lora_rank`` does not divide into latent blocks, a RoPE
                width is odd, an explicit size contradicts the variant (e.g. MQA with
                ``n_kv_head != 1``), or ``head_multiplier=2`` is asked of a variant whose KV cache
                would change (MHA, TPA: the ablation keeps the cache fixed), or a size is typed that
                the variant does not use or fixes otherwise (``kv_lora_rank`` on MHA,
                ``n_kv_head`` on MLA/TPA, ``qk_rope_head_dim != head_dim`` on MHA/GQA/MQA/TPA).
        """
        v, hd, d = self.variant, self.head_dim, self.d_model
        if is_user_variant(v) and _importable(v) and self.builtin_variant is not None:
            # a subclass of a built-in class: the sizes its parent's variant derives (a stored
            # spec holds them already: one read where the class does not import is kept as is)
            r = dataclasses.replace(self, variant=self.builtin_variant, variant_source=None)
            return dataclasses.replace(r.resolved(), variant=v, variant_source=self.variant_source)
        if is_user_variant(v):  # a user's class reads the sizes it needs; none is derived
            if self.head_multiplier != 1:
                raise ValueError(f"head_multiplier=2 (double heads, KV cache unchanged) is not "
                                 f"defined for a user's variant {v!r}: gtalib cannot know its "
                                 f"cache; allowed: 1")
            return self
        if self.head_multiplier == 2 and v in ("mha", "tpa"):
            raise ValueError(
                f"head_multiplier=2 (double heads, KV cache unchanged) is not defined for {v!r}: "
                "its KV cache grows with n_head; allowed for mqa, gqa, gta, mfa and the latent family"
            )
        h1 = self.n_head  # heads of the 1x model; KV heads and latents are derived from it
        H = h1 * self.head_multiplier
        f = dict(n_head=H, head_multiplier=1, n_kv_head=None, kv_lora_rank=None, q_lora_rank=None,
                 qk_rope_head_dim=None, qk_nope_head_dim=None, v_head_dim=hd)

        def given(name, default):
            val = getattr(self, name)
            return default if val is None else val

        if v == "mha":
            f["n_kv_head"] = given("n_kv_head", H)
            if f["n_kv_head"] != H:
                raise ValueError(f"mha needs n_kv_head == n_head ({H}), got n_kv_head={f['n_kv_head']}")
        elif v in ("mqa", "mfa"):
            f["n_kv_head"] = given("n_kv_head", 1)
            if f["n_kv_head"] != 1:
                raise ValueError(f"{v} has one KV head; got n_kv_head={f['n_kv_head']}")
        elif v in ("gqa", "gta"):
            if self.n_kv_head is None:
                if self.gqa_group <= 0 or h1 % self.gqa_group:
                    raise ValueError(
                        f"n_head={h1} must be divisible by gqa_group={self.gqa_group} for {v}"
                    )
                f["n_kv_head"] = h1 // self.gqa_group
            else:
                f["n_kv_head"] = self.n_kv_head
            if f["n_kv_head"] <= 0 or H % f["n_kv_head"]:
                raise ValueError(f"n_head={H} must be divisible by n_kv_head={f['n_kv_head']} for {v}")
        f["gqa_group"] = H // f["n_kv_head"] if f["n_kv_head"] else self.gqa_group

        if v in LATENT_VARIANTS:
            f["kv_lora_rank"] = given("kv_lora_rank", 4 * hd)
            f["qk_rope_head_dim"] = given("qk_rope_head_dim", hd // 2)
            f["qk_nope_head_dim"] = given("qk_nope_head_dim", hd)
            f["v_head_dim"] = given("v_head_dim", hd)
            f["q_lora_rank"] = given("q_lora_rank", _round8(d / 2 if v == "mla" else d / 3))
            blocks, _, groups = LATENT_LAYOUT[v]
            if f["kv_lora_rank"] % blocks:
                raise ValueError(
                    f"kv_lora_rank={f['kv_lora_rank']} must be divisible by the {blocks} latent "
                    f"blocks of {v}"
                )
            if H % groups:
                raise ValueError(f"n_head={H} must be divisible by the {groups} head groups of {v}")
        elif v == "mfa":
            f["q_lora_rank"] = given("q_lora_rank", _round8(2 * d / 3))
            f["v_head_dim"] = given("v_head_dim", 2 * hd)
            f["qk_rope_head_dim"] = f["v_head_dim"]
        elif v == "gta":
            f["qk_rope_head_dim"] = given("qk_rope_head_dim", hd // 2)
            f["qk_nope_head_dim"] = hd - f["qk_rope_head_dim"]
            if self.qk_nope_head_dim is not None and self.qk_nope_head_dim != f["qk_nope_head_dim"]:
                raise ValueError(
                    f"gta needs qk_nope_head_dim == head_dim - qk_rope_head_dim "
                    f"({f['qk_nope_head_dim']}), got {self.qk_nope_head_dim}"
                )
            if f["qk_nope_head_dim"] <= 0:
                raise ValueError(f"gta needs qk_rope_head_dim < head_dim, got {f['qk_rope_head_dim']}")
        else:  # mha, mqa, gqa, tpa: RoPE over the whole head
            f["qk_rope_head_dim"] = hd
        if v == "tpa":
            f["n_kv_head"] = None
            for name in ("tpa_q_rank", "tpa_rank"):
                if getattr(self, name) <= 0:
                    raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        rope = f["qk_rope_head_dim"]
        if rope <= 0 or rope % 2:
            raise ValueError(f"qk_rope_head_dim must be a positive even number (RoPE pairs), got {rope}")
        for name in ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "v_head_dim"):
            if f[name] is not None and f[name] <= 0:
                raise ValueError(f"{name} must be positive, got {f[name]}")
        # A size typed for a variant that does not use it (MHA with kv_lora_rank, MLA with
        # n_kv_head) or that the variant fixes otherwise (MHA with a half-width RoPE) would be
        # silently dropped: refuse it instead. Resolved configs pass (their sizes are the derived
        # ones), so resolved() stays idempotent.
        for name in VARIANT_SIZES:
            typed = getattr(self, name)
            if typed is None or typed == f[name]:
                continue
            if f[name] is None:
                raise ValueError(f"{name}={typed} does not apply to variant {v!r}; leave it None")
            raise ValueError(
                f"{name}={typed} contradicts variant {v!r}, which uses {name}={f[name]}; leave it None"
            )
        return dataclasses.replace(self, **f)

    def replace(self, **changes) -> "ModelConfig":
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable), used in run specs and hashes."""
        return dataclasses.asdict(self)
