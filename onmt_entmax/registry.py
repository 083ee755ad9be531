"""Name -> sparse transformation: probability mapping, training loss, decoding log-probabilities.

One registered class per transformation. An instance binds the hyper-parameters (alpha, tau,
bisection iterations) and gives the three things OpenNMT-py needs, computed by the same math:

- ``mapping(z)``      p = pi(z), rows of the last dim (attention weights, output distribution);
- ``loss(z, y)``      the matching Fenchel-Young loss L(z, y) = (p - e_y)^T z + H(p), gradient p - e_y
                      (softmax: cross-entropy);
- ``log_probs(z)``    log p with -inf where p = 0, the scores beam search adds up.

Option choices and help text of the OpenNMT-py options are generated from this registry, so a newly
registered class is usable from YAML without touching the option code.
"""
from __future__ import annotations

from typing import ClassVar, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from onmt_entmax import ops
from onmt_entmax.ops import check_alpha
from onmt_entmax.ops.alpha_relu import check_tau
from onmt_entmax.ops.entmax_bisect import check_n_iter

Alpha = Union[float, Tensor]

_REGISTRY: dict[str, type["Transformation"]] = {}


def register_transformation(cls: type["Transformation"]) -> type["Transformation"]:
    """Class decorator: make ``cls`` selectable by its ``name`` in every option."""
    if not getattr(cls, "name", None):
        raise ValueError(f"{cls.__name__} needs a class attribute `name` to be registered")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"a transformation named {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


# A transformation's hyper-parameters are checked as the math checks them (ops._common), in float32: the dtype
# models compute the mappings in (half precision is upcast), where an alpha of 1e39 is already inf.
MODEL_DTYPE = torch.float32


class Transformation:
    """A probability mapping pi with its Fenchel-Young loss and its decoding log-probabilities.

    Subclasses set ``name``, ``summary`` (one line for ``-h``) and implement ``mapping`` and
    ``loss``. ``alpha``/``tau``/``n_iter`` are stored only by the classes that use them.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    uses_alpha: ClassVar[bool] = False  # generator_alpha / *_attention_alpha apply
    uses_tau: ClassVar[bool] = False  # generator_tau applies
    for_attention: ClassVar[bool] = True  # a valid attention normalizer (rows sum to 1)
    sparse: ClassVar[bool] = True  # may output exact zeros
    loss_name: ClassVar[str] = ""  # how training logs name the loss

    def __init__(self, alpha: Optional[float] = None, tau: Optional[float] = None, n_iter: Optional[int] = None):
        self.alpha = alpha
        self.tau = tau
        self.n_iter = n_iter

    # --- the math -------------------------------------------------------------------------------
    def mapping(self, z: Tensor, dim: int = -1, alpha: Optional[Alpha] = None) -> Tensor:
        """p = pi(z) along ``dim``; ``alpha`` (tensor allowed) overrides the bound alpha."""
        raise NotImplementedError

    def loss(
        self,
        logits: Tensor,
        target: Tensor,
        ignore_index: int = -100,
        reduction: str = "sum",
        label_smoothing: float = 0.0,
        return_support: bool = False,
    ) -> Union[Tensor, tuple[Tensor, Tensor]]:
        """Fenchel-Young loss of ``logits`` (N, V) against ``target`` (N,); ``return_support``:
        (loss, number of nonzero probabilities of each row, 0 where the target is ignore_index)."""
        raise NotImplementedError

    def log_probs(self, z: Tensor, dim: int = -1) -> Tensor:
        """log pi(z): -inf exactly where pi(z) = 0, so beam search never revives a zero."""
        return torch.log(self.mapping(z, dim=dim))

    # --- helpers --------------------------------------------------------------------------------
    def describe(self) -> str:
        """Name with its bound hyper-parameters, e.g. ``entmax_bisect(alpha=1.3)``."""
        params = [f"{k}={getattr(self, k)}" for k in ("alpha", "tau", "n_iter") if getattr(self, k) is not None]
        return f"{self.name}({', '.join(params)})" if params else self.name

    def spec(self) -> tuple:
        """Hashable identity: two transformations with equal specs compute the same function."""
        return (self.name, self.alpha, self.tau, self.n_iter)

    def __repr__(self) -> str:
        return self.describe()


@register_transformation
class Softmax(Transformation):
    """p = exp(z) / sum exp(z); loss: cross-entropy (alpha = 1)."""

    name = "softmax"
    summary = "softmax, dense (alpha = 1)"
    sparse = False
    loss_name = "xent"

    def mapping(self, z, dim=-1, alpha=None):
        return torch.softmax(z, dim=dim)

    def log_probs(self, z, dim=-1):
        return torch.log_softmax(z, dim=dim)

    def loss(self, logits, target, ignore_index=-100, reduction="sum", label_smoothing=0.0, return_support=False):
        loss = F.cross_entropy(
            logits, target, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing
        )
        if not return_support:
            return loss
        with torch.no_grad():  # (exp underflows to 0 far below the maximum)
            nonzero = (torch.softmax(logits.float(), dim=-1) > 0) & (target != ignore_index).unsqueeze(-1)
        return loss, nonzero.sum(-1).to(torch.float32)


@register_transformation
class Sparsemax(Transformation):
    """p = argmin_{p in simplex} ||p - z||^2 = [z - tau]_+ (alpha = 2); loss: sparsemax loss."""

    name = "sparsemax"
    summary = "sparsemax, Euclidean projection onto the simplex (alpha = 2)"
    loss_name = "sparsemax FY loss"

    def mapping(self, z, dim=-1, alpha=None):
        return ops.sparsemax(z, dim=dim)

    def log_probs(self, z, dim=-1):
        return ops.log_probs(z, "sparsemax", dim=dim)

    def loss(self, logits, target, ignore_index=-100, reduction="sum", label_smoothing=0.0, return_support=False):
        return ops.sparsemax_loss(
            logits, target, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing,
            return_support=return_support,
        )


@register_transformation
class Entmax15(Transformation):
    """p = [z/2 - tau]_+^2 with exact tau (alpha = 1.5); loss: 1.5-entmax Fenchel-Young loss."""

    name = "entmax15"
    summary = "1.5-entmax, exact sort-based threshold"
    loss_name = "entmax15 FY loss"

    def mapping(self, z, dim=-1, alpha=None):
        return ops.entmax15(z, dim=dim)

    def log_probs(self, z, dim=-1):
        return ops.log_probs(z, "entmax15", dim=dim)

    def loss(self, logits, target, ignore_index=-100, reduction="sum", label_smoothing=0.0, return_support=False):
        return ops.entmax15_loss(
            logits, target, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing,
            return_support=return_support,
        )


@register_transformation
class EntmaxBisect(Transformation):
    """p = [(alpha - 1) z - tau]_+^{1/(alpha-1)}, tau by bisection; any alpha >= 1 (tensor allowed)."""

    name = "entmax_bisect"
    summary = "alpha-entmax by bisection, any alpha >= 1 (uses the *_alpha option and bisect_iter)"
    uses_alpha = True

    def __init__(self, alpha=None, tau=None, n_iter=None):
        alpha = 1.5 if alpha is None else alpha
        check_alpha(alpha, "alpha of entmax_bisect", dtype=MODEL_DTYPE)
        if n_iter is not None:
            check_n_iter(n_iter, MODEL_DTYPE, name="bisect_iter")
        super().__init__(alpha=float(alpha), n_iter=n_iter)

    @property
    def loss_name(self) -> str:  # type: ignore[override]
        return f"{self.alpha:g}-entmax FY loss"

    def mapping(self, z, dim=-1, alpha=None):
        return ops.entmax_bisect(z, alpha=self.alpha if alpha is None else alpha, dim=dim, n_iter=self.n_iter)

    def log_probs(self, z, dim=-1):
        return ops.log_probs(z, "entmax_bisect", alpha=self.alpha, dim=dim, n_iter=self.n_iter)

    def loss(self, logits, target, ignore_index=-100, reduction="sum", label_smoothing=0.0, return_support=False):
        return ops.entmax_bisect_loss(
            logits,
            target,
            alpha=self.alpha,
            n_iter=self.n_iter,
            ignore_index=ignore_index,
            reduction=reduction,
            label_smoothing=label_smoothing,
            return_support=return_support,
        )


@register_transformation
class AlphaReLU(Transformation):
    """p = [(alpha - 1) z - tau]_+^{1/(alpha-1)} with a constant tau: unnormalized, no threshold search.

    Decoding scores are log of these unnormalized values (-inf where zero). ``tau`` may be left
    ``None`` until it is known (``generator_tau: auto``); the math refuses to run before that.
    """

    name = "alpha_relu"
    summary = "alpha-ReLU, unnormalized, constant threshold tau (generator only; needs generator_tau)"
    uses_alpha = True
    uses_tau = True
    for_attention = False

    def __init__(self, alpha=None, tau=None, n_iter=None):
        alpha = 1.5 if alpha is None else alpha
        check_alpha(alpha, "alpha of alpha_relu", strict=True, dtype=MODEL_DTYPE)
        if tau is not None:
            check_tau(tau, MODEL_DTYPE, name="tau of alpha_relu")
        super().__init__(alpha=float(alpha), tau=None if tau is None else float(tau))

    @property
    def loss_name(self) -> str:  # type: ignore[override]
        return f"{self.alpha:g}-ReLU FY loss"

    def _tau(self) -> float:
        if self.tau is None:
            raise RuntimeError("alpha_relu: tau is not set yet (generator_tau 'auto' is resolved on the first batch)")
        return self.tau

    def mapping(self, z, dim=-1, alpha=None):
        return ops.alpha_relu(z, alpha=self.alpha if alpha is None else alpha, tau=self._tau(), dim=dim)

    def log_probs(self, z, dim=-1):
        return ops.alpha_relu_log(z, alpha=self.alpha, tau=self._tau())

    def loss(self, logits, target, ignore_index=-100, reduction="sum", label_smoothing=0.0, return_support=False):
        return ops.alpha_relu_loss(
            logits,
            target,
            alpha=self.alpha,
            tau=self._tau(),
            ignore_index=ignore_index,
            reduction=reduction,
            label_smoothing=label_smoothing,
            return_support=return_support,
        )


def transformation_names(for_attention: bool = False) -> list[str]:
    """Registered names (only those valid as attention normalizers if ``for_attention``)."""
    return [n for n, c in _REGISTRY.items() if c.for_attention or not for_attention]


def transformation_class(name: str, option: str = "function") -> type[Transformation]:
    """The registered class called ``name``; ValueError naming ``option`` and the choices otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"{option}: unknown function {name!r}; choose one of {', '.join(_REGISTRY)}"
        ) from None


def get_transformation(
    name: str,
    alpha: Optional[float] = None,
    tau: Optional[float] = None,
    n_iter: Optional[int] = None,
    option: str = "function",
) -> Transformation:
    """Instantiate the transformation ``name`` with the hyper-parameters it uses (others ignored)."""
    cls = transformation_class(name, option)
    kwargs: dict = {}
    if cls.uses_alpha:
        kwargs["alpha"] = alpha
    if cls.uses_tau:
        kwargs["tau"] = tau
    if cls is EntmaxBisect or issubclass(cls, EntmaxBisect):
        kwargs["n_iter"] = n_iter
    try:
        return cls(**kwargs)
    except ValueError as err:
        raise ValueError(f"{option}={name}: {err}") from None


def help_text(for_attention: bool = False) -> str:
    """One ``name: summary`` entry per registered transformation, for option help strings."""
    return "; ".join(f"{n}: {_REGISTRY[n].summary}" for n in transformation_names(for_attention))


__all__ = [
    "Transformation",
    "Softmax",
    "Sparsemax",
    "Entmax15",
    "EntmaxBisect",
    "AlphaReLU",
    "register_transformation",
    "transformation_names",
    "transformation_class",
    "get_transformation",
    "help_text",
]

