"""alpha-ReLU analyses of "Speeding Up Entmax" (Tezekbayev et al.), per decoding step.

- Self-normalization (their Fig. 7): the distribution of sum_v alpha-ReLU(z)_v over the decoding
  steps of a test set; it concentrates around a constant (1.24 IWSLT, 1.09 WMT'14 in the paper),
  so unnormalized step scores remain comparable in beam search.
- Sparsity (their Fig. 5): the distribution of the proportion of zero components per step,
  alpha-ReLU against 1.5-entmax (softmax never has zeros).

Input per step are the model's own log-scores (T, V), -inf for zeros, as decoding uses them; the
sum and the support come from ``analysis.sparsity`` (``probability_sums``, ``output_support``).
Running a checkpoint over a test set is OpenNMT-py work: ``onmt_entmax.onmt.decoding.teacher_forcing``
(command ``onmt-entmax-alpha-relu-stats``) feeds ``StepStats.add``.
"""
from __future__ import annotations

from typing import Mapping, Optional

import torch
from torch import Tensor

from .figures import legend_above, pyplot, save_figure
from .sparsity import output_support, probability_sums

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _quantiles(xs: Tensor) -> dict[str, float]:
    q = torch.quantile(xs.double(), torch.tensor(QUANTILES, dtype=torch.float64))
    return {f"q{int(100 * a):02d}": float(v) for a, v in zip(QUANTILES, q)}


class StepStats:
    """Per-step output sum and zero count, accumulated over a test set."""

    def __init__(self) -> None:
        self._sums: list[Tensor] = []
        self._zeros: list[Tensor] = []
        self.vocab: Optional[int] = None

    def add(self, log_probs: Tensor, mask: Optional[Tensor] = None) -> None:
        """log_probs (..., V) of decoding steps; ``mask`` (leading shape, True = a real step)."""
        lp = log_probs.detach()
        if mask is not None:
            if mask.shape != lp.shape[:-1]:
                raise ValueError(f"mask must be the leading shape of log_probs {tuple(lp.shape[:-1])}, "
                                 f"got {tuple(mask.shape)}")
            lp = lp[mask.bool()]
        lp = lp.reshape(-1, lp.size(-1))
        if self.vocab is not None and lp.size(-1) != self.vocab:
            raise ValueError(f"log_probs: vocabulary size {lp.size(-1)} differs from earlier steps ({self.vocab})")
        self.vocab = lp.size(-1)
        self._sums.append(probability_sums(lp).double().cpu())
        self._zeros.append((lp.size(-1) - output_support(lp)).cpu())

    @property
    def sums(self) -> Tensor:
        """sum_v p_v of every step (1 for normalized mappings)."""
        return torch.cat(self._sums) if self._sums else torch.empty(0, dtype=torch.float64)

    @property
    def zeros(self) -> Tensor:
        """Number of zero components of every step."""
        return torch.cat(self._zeros) if self._zeros else torch.empty(0, dtype=torch.long)

    def summary(self) -> dict:
        """Steps, mean / std / quantiles of the sum, and of the proportion of zeros."""
        s, z = self.sums, self.zeros
        if s.numel() == 0:
            return {"steps": 0}
        frac = z.double() / self.vocab
        return {
            "steps": int(s.numel()), "vocab": self.vocab,
            "sum_mean": float(s.mean()), "sum_std": float(s.std(unbiased=False)),
            **{f"sum_{k}": v for k, v in _quantiles(s).items()},
            "zeros_mean": float(z.double().mean()), "zero_share_mean": float(frac.mean()),
            **{f"zero_share_{k}": v for k, v in _quantiles(frac).items()},
        }


def plot_sums(sums: Mapping[str, Tensor], path: str, title: Optional[str] = None, bins: int = 50) -> str:
    """Histogram of the per-step output sum, one per model (their Fig. 7). Returns ``path``.

    A normalized model's sums are 1 up to rounding: it is drawn as a line at its value, not as a
    histogram whose bins (of its own ~1e-8 spread) would dwarf every other model's."""
    if not sums or all(v.numel() == 0 for v in sums.values()):
        raise ValueError("plot_sums: no steps to plot")
    return _histograms({n: v.double() for n, v in sums.items() if v.numel()}, path,
                       "sum of output components per decoding step", title, bins, mark=1.0)


def plot_zero_shares(stats: Mapping[str, "StepStats"], path: str, title: Optional[str] = None,
                     bins: int = 40) -> str:
    """Histogram of the proportion of zero components per step, one per model (their Fig. 5)."""
    shares = {name: st.zeros.double() / st.vocab for name, st in stats.items() if st.vocab}
    if not shares:
        raise ValueError("plot_zero_shares: no steps to plot")
    return _histograms(shares, path, "proportion of zero components per decoding step", title, bins,
                       hist_range=(0.0, 1.0))


POINT_SPREAD = 1e-4  # a series whose values all lie within this of each other is one value (a line);
# a normalized mapping's float32 step sums spread by ~1e-6


def _histograms(series: Mapping[str, Tensor], path: str, xlabel: str, title: Optional[str], bins: int,
                hist_range: Optional[tuple] = None, mark: Optional[float] = None) -> str:
    """One density histogram per model over shared bins (the range of all of them, or ``hist_range``),
    its mean in the legend; a series concentrated on one value (max - min <= POINT_SPREAD, e.g. the sums of
    a normalized mapping) is a vertical line there instead. Saved to ``path``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    spread = {name: float(v.max() - v.min()) for name, v in series.items()}
    spread_out = {n: v for n, v in series.items() if spread[n] > POINT_SPREAD}
    if hist_range is None and spread_out:
        values = torch.cat(list(spread_out.values()))
        hist_range = (float(values.min()), float(values.max()))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, v) in enumerate(series.items()):
        color = colors[i % len(colors)]
        label = f"{name} (mean {float(v.mean()):.3f})"
        if name in spread_out:
            ax.hist(v.numpy(), bins=bins, range=hist_range, alpha=0.6, density=True, color=color, label=label)
        else:
            ax.axvline(float(v.mean()), color=color, lw=2.0,
                       label=f"{name}: every step {float(v.mean()):.3f} (spread {spread[name]:.0e})")
    if mark is not None:
        ax.axvline(mark, color="grey", lw=0.6, ls=":")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    legend_above(ax, title=title)  # a legend inside would cover the tallest bars, which reach the top
    return save_figure(fig, path)


def format_summary(name: str, s: dict) -> str:
    if not s.get("steps"):
        return f"{name}: no steps"
    return (f"{name}: {s['steps']} steps, V={s['vocab']}; output sum mean {s['sum_mean']:.4f} std {s['sum_std']:.4f} "
            f"(5/50/95%: {s['sum_q05']:.4f} / {s['sum_q50']:.4f} / {s['sum_q95']:.4f}); zeros per step "
            f"{s['zeros_mean']:.1f} = {100 * s['zero_share_mean']:.2f}% of V (5/50/95%: "
            f"{100 * s['zero_share_q05']:.2f} / {100 * s['zero_share_q50']:.2f} / {100 * s['zero_share_q95']:.2f}%)")


__all__ = ["StepStats", "plot_sums", "plot_zero_shares", "format_summary", "QUANTILES"]
