"""Decoding and analysis options of sparse models (``onmt_translate`` / ``eole predict``) and their checks.

``DECODING_OPTIONS`` declares each option once (``options.table.Option``, section ``decoding``); each
adapter renders them into its toolkit's options, and ``DecodingConfig`` is a dataclass generated from them (a
field per row, of its type and default). ``DecodingConfig.from_opts`` resolves them against the model's output
layers and refuses requests that cannot be answered, naming the option.
"""
from __future__ import annotations

from dataclasses import make_dataclass
from typing import Optional, Sequence

from onmt_entmax.errors import EntmaxOptionError

from .table import Option

DECODING_OPTIONS = (
    Option("certificate", bool, False,
           "Require the exactness certificate of Peters et al. (2019) per sentence: the beam covered every "
           "hypothesis with nonzero probability. Computed anyway for sparse output layers; with this flag a "
           "dense (softmax) model is an error.", "decoding"),
    Option("enumerate_support", bool, False,
           "List every output sequence with nonzero probability and its probability (and the mass covered), "
           "when that set is finite and has at most enumerate_cap sequences; written to entmax_report.", "decoding"),
    Option("enumerate_cap", int, 100,
           "Largest support enumerate_support lists; a larger one is reported as exceeding the cap.", "decoding"),
    Option("exact_search", bool, False,
           "Also find the most probable output exactly (breadth first over the nonzero support, pruning every "
           "prefix less probable than the beam's best or the greedy output) "
           "and report whether beam search agrees. For small problems.", "decoding"),
    Option("exact_max_expansions", int, 20000,
           "Give up exact search for a sentence after this many expanded prefixes (decoder steps).", "decoding"),
    Option("empty_check", bool, False,
           "Report the share of sentences whose empty output (EOS first) is more probable than the beam "
           "hypothesis ('cat got your tongue').", "decoding"),
    Option("sparsity_stats", bool, False,
           "Average number of nonzero output probabilities and of attended source tokens per target token of "
           "the best hypothesis, and the per-step sum of output probabilities (alpha-ReLU "
           "self-normalisation).", "decoding"),
    Option("forced_support", bool, False,
           "Forced decoding of the tgt reference: per step, every token with nonzero probability "
           "(Figure 2 of Peters et al. 2019): logged per sentence (its most probable tokens a step, the "
           "reference's marked) and written to entmax_report (forced_max_support tokens a step).", "decoding"),
    Option("forced_max_support", int, 50,
           "At most this many tokens listed per forced step (dense models have the whole vocabulary).", "decoding"),
    Option("attn_heatmap", str, None,
           "Write a PNG heatmap of the best hypothesis' attention with nonzero cells outlined, for sentence "
           "heatmap_sentence.", "decoding"),
    Option("heatmap_sentence", int, 1, "Which input line (1-based) attn_heatmap draws.", "decoding"),
    Option("entmax_report", str, None,
           "Write per-sentence results (hypotheses, certificate, analyses) as JSON lines to this file; a "
           "summary is logged at the end of decoding either way.", "decoding"),
)


class DecodingChecks:
    """The behaviour of a ``DecodingConfig``: what its options ask of the hooks, and ``from_opts``, which
    resolves them and refuses what cannot be answered. Its fields come from the option rows
    (``decoding_config_class``)."""

    TABLE: tuple = ()  # the option rows the class has a field for

    @property
    def needs_scorer(self) -> bool:
        return any((self.enumerate_support, self.exact_search, self.empty_check, self.sparsity_stats,
                    self.forced_support, self.attn_heatmap))

    @property
    def active(self) -> bool:
        return self.certificate or self.needs_scorer or bool(self.entmax_report)

    @classmethod
    def from_opts(cls, opt, transformations: Sequence) -> DecodingConfig:
        """``transformations``: each ensemble member's output transformation (None = stock softmax)."""
        def get(name, default=None):
            v = getattr(opt, name, None)
            return default if v is None else v

        names = [t.name if t is not None else "softmax" for t in transformations] or ["softmax"]
        cfg = cls(
            sparse_output=all(t is not None and t.sparse for t in transformations) and bool(transformations),
            unnormalised=any(t is not None and t.name == "alpha_relu" for t in transformations),
            **{o.name: get(o.name, o.default) for o in cls.TABLE if o.name != "certificate"},
        )
        dense = f"generator_function {'/'.join(sorted(set(names)))}"
        cfg.certificate = bool(get("certificate", False)) or cfg.sparse_output
        if get("certificate", False) and not cfg.sparse_output:
            raise EntmaxOptionError(
                f"-certificate needs a sparse output layer, but this model is dense ({dense}): every sequence has "
                "nonzero probability, so no beam is ever exhaustive. Use a model trained with sparsemax, entmax15, "
                "entmax_bisect or alpha_relu.")
        if cfg.enumerate_support and not cfg.sparse_output:
            raise EntmaxOptionError(f"-enumerate_support needs a sparse output layer; this model is dense ({dense}), "
                                    "so its support is every sequence (infinite).")
        if cfg.exact_search and cfg.unnormalised:
            raise EntmaxOptionError("-exact_search needs a normalised output layer: alpha_relu scores can exceed 1, "
                                    "so a prefix's score does not bound its completions and the search's pruning "
                                    "is unsound.")
        if cfg.forced_support and not get("tgt"):
            raise EntmaxOptionError("-forced_support decodes the reference: give it with -tgt (one line per -src line)")
        if cfg.enumerate_cap < 1:
            raise EntmaxOptionError(f"-enumerate_cap must be >= 1, got {cfg.enumerate_cap}")
        if cfg.exact_max_expansions < 1:
            raise EntmaxOptionError(f"-exact_max_expansions must be >= 1, got {cfg.exact_max_expansions}")
        if cfg.heatmap_sentence < 1:
            raise EntmaxOptionError(f"-heatmap_sentence is 1-based, got {cfg.heatmap_sentence}")
        length_pen = get("length_penalty", "none")
        cov_pen = get("coverage_penalty", "none")
        cfg.plain_scores = length_pen in (None, "none") and cov_pen in (None, "none")
        cfg.length_penalty = length_pen or "none"
        return cfg


def decoding_config_class(options: Sequence[Option]) -> type:
    """The dataclass ``DecodingConfig`` with a field per row of ``options`` (the row's type, Optional where its
    default is None, and its default), between what the model's output layers decide and what the search's
    penalties do: a row added to ``DECODING_OPTIONS`` is a field with no other edit."""
    resolved_from_model = [("sparse_output", bool, False),
                           ("unnormalised", bool, False)]  # alpha-ReLU: scores are not probabilities
    rows = [(o.name, o.type if o.default is not None else Optional[o.type], o.default) for o in options]
    resolved_from_search = [("plain_scores", bool, True),  # no length / coverage penalty: scores are summed log-probs
                            ("length_penalty", str, "none")]  # what the beam ranks finished hypotheses by
    namespace = {"__module__": __name__, "TABLE": tuple(options), "__doc__": (
        "What the translator hooks do, resolved from the translate opt and the checkpoint's opt (an option the "
        "opt lacks takes its default from the table; ``DecodingConfig()`` is the inactive one).")}
    return make_dataclass("DecodingConfig", resolved_from_model + rows + resolved_from_search,
                          bases=(DecodingChecks,), namespace=namespace)


DecodingConfig = decoding_config_class(DECODING_OPTIONS)
