"""Translate-time decoding and analysis options (``onmt_translate``, group "Entmax")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

DECODING_OPTIONS = (
    "certificate", "enumerate_support", "enumerate_cap", "exact_search", "exact_max_expansions",
    "empty_check", "sparsity_stats", "forced_support", "forced_max_support", "attn_heatmap",
    "heatmap_sentence", "entmax_report",
)


def _group(parser):
    try:
        from ..options import _entmax_group  # the integration's shared "Entmax" group

        return _entmax_group(parser)
    except ImportError:  # pragma: no cover - integration not installed
        for g in parser._action_groups:
            if g.title == "Entmax":
                return g
        return parser.add_argument_group("Entmax")


def add_decoding_options(parser) -> None:
    """Add the sparse decoding / analysis options (idempotent)."""
    if any(a.dest == "enumerate_support" for a in parser._actions):
        return
    g = _group(parser)
    g.add("--certificate", "-certificate", action="store_true",
          help="Require the exactness certificate of Peters et al. (2019) per sentence: the beam covered every "
               "hypothesis with nonzero probability. Computed anyway for sparse output layers; with this flag a "
               "dense (softmax) model is an error.")
    g.add("--enumerate_support", "-enumerate_support", action="store_true",
          help="List every output sequence with nonzero probability and its probability (and the mass covered), "
               "when that set is finite and has at most -enumerate_cap sequences; written to -entmax_report.")
    g.add("--enumerate_cap", "-enumerate_cap", type=int, default=100,
          help="Largest support -enumerate_support lists; a larger one is reported as exceeding the cap.")
    g.add("--exact_search", "-exact_search", action="store_true",
          help="Also find the most probable output exactly (depth-first over the nonzero support with pruning) "
               "and report whether beam search agrees. For small problems.")
    g.add("--exact_max_expansions", "-exact_max_expansions", type=int, default=20000,
          help="Give up exact search for a sentence after this many expanded prefixes.")
    g.add("--empty_check", "-empty_check", action="store_true",
          help="Report the share of sentences whose empty output (EOS first) is more probable than the beam "
               "hypothesis ('cat got your tongue').")
    g.add("--sparsity_stats", "-sparsity_stats", action="store_true",
          help="Average number of nonzero output probabilities and of attended source tokens per target token of "
               "the best hypothesis, and the per-step sum of output probabilities (alpha-ReLU self-normalisation).")
    g.add("--forced_support", "-forced_support", action="store_true",
          help="Forced decoding of the -tgt reference: per step, every token with nonzero probability "
               "(Figure 2 of Peters et al. 2019); written to -entmax_report.")
    g.add("--forced_max_support", "-forced_max_support", type=int, default=50,
          help="At most this many tokens listed per forced step (dense models have the whole vocabulary).")
    g.add("--attn_heatmap", "-attn_heatmap", type=str, default=None,
          help="Write a PNG heatmap of the best hypothesis' attention with nonzero cells outlined, for sentence "
               "-heatmap_sentence.")
    g.add("--heatmap_sentence", "-heatmap_sentence", type=int, default=1,
          help="Which input line (1-based) -attn_heatmap draws.")
    g.add("--entmax_report", "-entmax_report", type=str, default=None,
          help="Write per-sentence results (hypotheses, certificate, analyses) as JSON lines to this file; a "
               "summary is logged at the end of translation either way.")


@dataclass
class DecodingConfig:
    """What the translator hooks do, resolved from the translate opt and the checkpoint's opt."""

    sparse_output: bool = False
    unnormalised: bool = False  # alpha-ReLU: scores are not probabilities
    certificate: bool = False
    enumerate_support: bool = False
    enumerate_cap: int = 100
    exact_search: bool = False
    exact_max_expansions: int = 20000
    empty_check: bool = False
    sparsity_stats: bool = False
    forced_support: bool = False
    forced_max_support: int = 50
    attn_heatmap: Optional[str] = None
    heatmap_sentence: int = 1
    entmax_report: Optional[str] = None
    plain_scores: bool = True  # no length / coverage penalty: scores are summed log-probs

    @property
    def needs_scorer(self) -> bool:
        return any((self.enumerate_support, self.exact_search, self.empty_check, self.sparsity_stats,
                    self.forced_support, self.attn_heatmap))

    @property
    def active(self) -> bool:
        return self.certificate or self.needs_scorer or bool(self.entmax_report)

    @classmethod
    def from_opts(cls, opt, transformations: Sequence) -> "DecodingConfig":
        """``transformations``: each ensemble member's output transformation (None = stock softmax)."""
        def get(name, default=None):
            v = getattr(opt, name, None)
            return default if v is None else v

        names = [t.name if t is not None else "softmax" for t in transformations] or ["softmax"]
        cfg = cls(
            sparse_output=all(t is not None and t.sparse for t in transformations) and bool(transformations),
            unnormalised=any(t is not None and t.name == "alpha_relu" for t in transformations),
            **{k: get(k, getattr(cls, k)) for k in DECODING_OPTIONS if k != "certificate"},
        )
        dense = f"generator_function {'/'.join(sorted(set(names)))}"
        cfg.certificate = bool(get("certificate", False)) or cfg.sparse_output
        if get("certificate", False) and not cfg.sparse_output:
            raise ValueError(
                f"-certificate needs a sparse output layer, but this model is dense ({dense}): every sequence has "
                "nonzero probability, so no beam is ever exhaustive. Use a model trained with sparsemax, entmax15, "
                "entmax_bisect or alpha_relu.")
        if cfg.enumerate_support and not cfg.sparse_output:
            raise ValueError(f"-enumerate_support needs a sparse output layer; this model is dense ({dense}), "
                             "so its support is every sequence (infinite).")
        if cfg.exact_search and cfg.unnormalised:
            raise ValueError("-exact_search needs a normalised output layer: alpha_relu scores can exceed 1, so a "
                             "prefix's score does not bound its completions and depth-first pruning is unsound.")
        if cfg.enumerate_cap < 1:
            raise ValueError(f"-enumerate_cap must be >= 1, got {cfg.enumerate_cap}")
        if cfg.exact_max_expansions < 1:
            raise ValueError(f"-exact_max_expansions must be >= 1, got {cfg.exact_max_expansions}")
        if cfg.heatmap_sentence < 1:
            raise ValueError(f"-heatmap_sentence is 1-based, got {cfg.heatmap_sentence}")
        length_pen = get("length_penalty", "none")
        cov_pen = get("coverage_penalty", "none")
        cfg.plain_scores = length_pen in (None, "none") and cov_pen in (None, "none")
        return cfg
