"""Model options of sparse models (output layer, loss, attention): their table and their checks.

``MODEL_OPTIONS`` declares each option once (``options.table.Option``, section ``model``); the adapters
render it into OpenNMT-py's argparse group and Eole's ``model:`` fields.

``validate_entmax_opts(opt)`` reads the options as attributes of ``opt`` (an argparse namespace, or a
flat view of an Eole model config) and raises ``EntmaxOptionError`` naming the first bad one; values are
checked as the math checks them (``ops._common``), in float32, the dtype models compute the mappings in.
``check_applicable`` refuses (or warns of) options the model would not use; ``check_label_smoothing`` and
``check_search_sizes`` the stock values the plugin's loss and beam search cannot take. Both adapters call
these same functions.
"""
from __future__ import annotations

from typing import Callable, Optional

from onmt_entmax.errors import EntmaxOptionError
from onmt_entmax.modules.attention import ALPHA_MAX, ALPHA_MIN
from onmt_entmax.ops import check_alpha, check_number
from onmt_entmax.ops.entmax_bisect import check_n_iter
from onmt_entmax.registry import (
    MODEL_DTYPE,
    Transformation,
    get_transformation,
    help_text,
    transformation_class,
    transformation_names,
)

from .table import Option

ATTENTION_KINDS = {  # per-kind override prefix -> what it covers
    "enc": "Transformer encoder self-attention",
    "dec": "Transformer decoder self-attention",
    "context": "Transformer decoder context (encoder-decoder) attention",
}

DEFERRED_TAU = ("auto", "formula")  # generator_tau words resolved later (first batch / model size)


def _override(what: str, default: str = "the checkpoint's") -> str:
    return f"Override the model's {what} (default: {default})."


def _normalizers() -> list[str]:
    return transformation_names(for_attention=True)


def _per_kind() -> tuple[Option, ...]:
    rows = ()
    for kind, what in ATTENTION_KINDS.items():
        rows += (
            Option(f"{kind}_attention_function", str, None, f"{what} normalizer (default: attention_function).",
                   "model", choices=_normalizers,
                   override_help=_override(f"{kind}_attention_function", "the value stored in the checkpoint")),
            Option(f"{kind}_attention_alpha", float, None, f"{what} alpha (default: attention_alpha).", "model",
                   minimum=1.0, override_help=_override(f"{kind}_attention_alpha")),
        )
    return rows


# The model options, in the order -h lists them; choices and the functions' help come from the registry
# (so they list classes registered later too).
MODEL_OPTIONS = (
    Option("generator_function", str, "softmax",
           lambda: "Output layer mapping and its Fenchel-Young loss (training) and log-probabilities (decoding). "
                   + help_text(),
           "model", choices=transformation_names, stock=True,
           override_help=_override("generator_function", "the value stored in the checkpoint")),
    Option("generator_alpha", float, None,
           "alpha of generator_function entmax_bisect / alpha_relu (>= 1; default 1.5).", "model", minimum=1.0,
           override_help=_override("generator_alpha")),
    Option("generator_tau", float, None,
           "alpha_relu threshold tau: a number, or 'auto' = the mean 1.5-entmax threshold of the untrained model's "
           "logits on the first training batch, or 'formula' = the closed form of Speeding Up Entmax eq. (3) from "
           "d_model and the vocabulary size. Required with alpha_relu; the resolved value is saved in the "
           "checkpoint.", "model", words=DEFERRED_TAU, override_help=_override("alpha_relu threshold")),
    Option("bisect_iter", int, None,
           "Bisection iterations for entmax_bisect (default: enough for the dtype's precision).", "model",
           minimum=1, override_help=_override("bisection iterations")),
    Option("global_attention_function", str, "softmax",
           lambda: "RNN global attention normalizer. " + help_text(for_attention=True), "model",
           choices=_normalizers, stock=True, on_decoder=True,
           override_help=_override("global_attention_function", "the value stored in the checkpoint")),
    Option("global_attention_alpha", float, None,
           "alpha of global_attention_function entmax_bisect (>= 1; default 1.5).", "model", minimum=1.0,
           override_help=_override("global_attention_alpha")),
    Option("attention_function", str, "softmax",
           lambda: "Transformer attention normalizer for all attention (encoder self, decoder self, context); the "
                   "*_attention_function options override it per kind. A sparse one replaces softmax on every "
                   "path, the GPU fast paths (SDPA, flash) included. " + help_text(for_attention=True),
           "model", choices=_normalizers,
           override_help=_override("attention_function", "the value stored in the checkpoint")),
    Option("attention_alpha", float, None,
           "alpha of attention_function entmax_bisect, or the starting alpha with learn_alpha (default 1.5).",
           "model", minimum=1.0, override_help=_override("attention_alpha")),
    Option("learn_alpha", bool, False,  # changes the parameters: no override at translation time
           "Learn one alpha per head and layer, alpha = 1 + sigmoid(a) clamped to [1.01, 2] (Adaptively Sparse "
           "Transformers); needs a sparse attention_function (entmax15 or entmax_bisect) for the attention it "
           "applies to.", "model"),
) + _per_kind()


def model_option_names() -> list[str]:
    """Every model option of sparse models (option groups, misspelling checks and docs list them)."""
    return [o.name for o in MODEL_OPTIONS]


def _alpha(opt, name: str) -> Optional[float]:
    """The alpha option ``name``, checked as the math checks it, in the dtype models compute in."""
    value = getattr(opt, name, None)
    if value is None:
        return None
    check_alpha(value, name, dtype=MODEL_DTYPE, error=EntmaxOptionError)
    return float(value)


def attention_spec(opt, kind: str) -> tuple[str, Optional[float]]:
    """(function, alpha) of the Transformer attention ``kind`` in {enc, dec, context}."""
    name = getattr(opt, f"{kind}_attention_function", None) or getattr(opt, "attention_function", "softmax")
    alpha = _alpha(opt, f"{kind}_attention_alpha")
    if alpha is None:
        alpha = _alpha(opt, "attention_alpha")
    return name, alpha


def _uses_transformer(opt) -> bool:
    return "transformer" in (getattr(opt, "encoder_type", ""), getattr(opt, "decoder_type", ""))


def validate_entmax_opts(opt) -> None:
    """Raise ``EntmaxOptionError`` (a ValueError) naming the first bad Entmax option of ``opt``."""
    bisect_iter = getattr(opt, "bisect_iter", None)
    if bisect_iter is not None:
        check_n_iter(bisect_iter, MODEL_DTYPE, name="bisect_iter", error=EntmaxOptionError)

    gen = getattr(opt, "generator_function", "softmax")
    try:
        cls = transformation_class(gen, "generator_function")
    except ValueError as err:
        raise EntmaxOptionError(str(err)) from None
    alpha = _alpha(opt, "generator_alpha")
    tau = getattr(opt, "generator_tau", None)
    if cls.uses_tau:
        if tau is None:
            raise EntmaxOptionError(
                f"generator_function {gen} needs generator_tau: a number, 'auto' (the mean 1.5-entmax "
                f"threshold of the untrained model on the first training batch) or 'formula' (eq. 3 of "
                f"Speeding Up Entmax)")
        if tau not in DEFERRED_TAU:
            if isinstance(tau, bool) or not isinstance(tau, (int, float)):
                raise EntmaxOptionError(f"generator_tau must be a finite number, 'auto' or 'formula', got {tau!r}")
            check_number(tau, "generator_tau", MODEL_DTYPE, EntmaxOptionError)
    try:
        get_transformation(gen, alpha=alpha, tau=None if tau in DEFERRED_TAU else tau,
                           n_iter=bisect_iter, option="generator_function")
    except ValueError as err:
        raise EntmaxOptionError(f"generator_alpha / generator_function: {err}") from None
    if getattr(opt, "copy_attn", False) and gen != "softmax":
        raise EntmaxOptionError(
            f"copy_attn mixes the generator's probabilities with copy probabilities and supports only "
            f"generator_function softmax, got generator_function {gen}")

    ga = getattr(opt, "global_attention_function", "softmax")
    try:
        get_transformation(ga, alpha=_alpha(opt, "global_attention_alpha"), n_iter=bisect_iter,
                           option="global_attention_function")
        if not transformation_class(ga).for_attention:
            raise ValueError(f"global_attention_function: {ga} is not an attention normalizer")
    except ValueError as err:
        raise EntmaxOptionError(str(err)) from None

    sparse_kinds = []
    for kind in ATTENTION_KINDS:
        name, kalpha = attention_spec(opt, kind)
        option = f"{kind}_attention_function" if getattr(opt, f"{kind}_attention_function", None) \
            else "attention_function"
        try:
            t = get_transformation(name, alpha=kalpha, n_iter=bisect_iter, option=option)
        except ValueError as err:
            raise EntmaxOptionError(str(err)) from None
        if not t.for_attention:
            raise EntmaxOptionError(f"{option}: {name} is not an attention normalizer")
        if getattr(opt, "learn_alpha", False) and t.sparse:
            if name == "sparsemax":
                raise EntmaxOptionError(
                    f"learn_alpha starts from the alpha of {option}; sparsemax (alpha = 2) is the upper end "
                    f"of the learnable range: use entmax15 or entmax_bisect with attention_alpha")
            start = getattr(t, "alpha", 1.5) or 1.5
            if not ALPHA_MIN <= start < ALPHA_MAX:
                raise EntmaxOptionError(
                    f"learn_alpha: the starting alpha ({kind}_attention_alpha / attention_alpha = {start}) must "
                    f"be in [{ALPHA_MIN}, {ALPHA_MAX})")
            sparse_kinds.append(kind)
    if getattr(opt, "learn_alpha", False):
        if not sparse_kinds:
            raise EntmaxOptionError(
                "learn_alpha needs a sparse Transformer attention: set attention_function to entmax15 or "
                "entmax_bisect (softmax has no alpha to learn)")
        if not _uses_transformer(opt):
            raise EntmaxOptionError("learn_alpha applies to Transformer attention (encoder_type/decoder_type "
                                    "transformer)")


# --- options that would be ignored -----------------------------------------------------------------------
FIXED_ALPHA = {"softmax": 1.0, "entmax15": 1.5, "sparsemax": 2.0}  # mappings whose alpha is their definition


def _present_kinds(opt) -> set:
    """The Transformer attention kinds the model has: enc (self-attention of a Transformer
    encoder), dec and context (a Transformer decoder; a language model has no context attention)."""
    kinds = set()
    if getattr(opt, "encoder_type", None) == "transformer":
        kinds.add("enc")
    if getattr(opt, "decoder_type", None) in ("transformer", "transformer_lm"):
        kinds.add("dec")
        if getattr(opt, "decoder_type", None) == "transformer" and getattr(opt, "model_task", "seq2seq") != "lm":
            kinds.add("context")
    return kinds


def _alpha_ignored(name: str, value, function: str) -> Optional[str]:
    """Why ``name`` = value is ignored by ``function`` (None if it is used, or equals the fixed alpha)."""
    if value is None:
        return None
    cls = transformation_class(function)
    if cls.uses_alpha or FIXED_ALPHA.get(function) == float(value):
        return None
    return (f"{name}={value:g} is ignored: {function} has alpha {FIXED_ALPHA.get(function, '?')} by definition "
            f"(entmax_bisect takes any alpha)")


def inapplicable_options(opt, names: Optional[set] = None) -> tuple[list[str], list[str]]:
    """(errors, warnings) about Entmax options of ``opt`` the model would ignore (only those in
    ``names`` when given: the options a user set explicitly). Errors: a sparse function for an
    attention the model does not have (it would train dense where sparse was asked for). Warnings:
    an alpha, tau or bisect_iter that its mapping does not take."""
    def given(name):
        return names is None or name in names

    errors, warnings = [], []
    gen = getattr(opt, "generator_function", "softmax") or "softmax"
    if given("generator_alpha"):
        warnings.append(_alpha_ignored("generator_alpha", getattr(opt, "generator_alpha", None), gen))
    if given("generator_tau") and getattr(opt, "generator_tau", None) is not None \
            and not transformation_class(gen).uses_tau:
        warnings.append(f"generator_tau is ignored: only alpha_relu has a fixed threshold (generator_function "
                        f"{gen} solves its own at every step)")
    rnn_decoder = getattr(opt, "decoder_type", "rnn") == "rnn"
    glob = getattr(opt, "global_attention_function", "softmax") or "softmax"
    if given("global_attention_function") and glob != "softmax" and not rnn_decoder:
        errors.append(f"global_attention_function {glob} does not apply: it is the RNN decoder's attention, and "
                      f"decoder_type is {getattr(opt, 'decoder_type', None)} (Transformer attention is "
                      f"attention_function)")
    if given("global_attention_alpha") and getattr(opt, "global_attention_alpha", None) is not None:
        if not rnn_decoder:
            warnings.append("global_attention_alpha is ignored: there is no RNN decoder attention "
                            f"(decoder_type {getattr(opt, 'decoder_type', None)})")
        else:
            warnings.append(_alpha_ignored("global_attention_alpha", opt.global_attention_alpha, glob))
    present = _present_kinds(opt)
    learn = bool(getattr(opt, "learn_alpha", False))
    covered = [k for k in ATTENTION_KINDS if not getattr(opt, f"{k}_attention_function", None)]
    base = getattr(opt, "attention_function", "softmax") or "softmax"
    if given("attention_function") and base != "softmax" and covered and not present & set(covered):
        errors.append(f"attention_function {base} does not apply: it normalizes Transformer attention, and this "
                      f"model has none (encoder_type {getattr(opt, 'encoder_type', None)}, decoder_type "
                      f"{getattr(opt, 'decoder_type', None)}; RNN attention is global_attention_function)")
    for kind in ATTENTION_KINDS:
        fn = getattr(opt, f"{kind}_attention_function", None)
        if given(f"{kind}_attention_function") and fn and fn != "softmax" and kind not in present:
            errors.append(f"{kind}_attention_function {fn} does not apply: this model has no "
                          f"{ATTENTION_KINDS[kind]}")
        alpha = getattr(opt, f"{kind}_attention_alpha", None)
        if given(f"{kind}_attention_alpha") and alpha is not None:
            if kind not in present:
                warnings.append(f"{kind}_attention_alpha is ignored: this model has no {ATTENTION_KINDS[kind]}")
            elif not learn:
                warnings.append(_alpha_ignored(f"{kind}_attention_alpha", alpha, attention_spec(opt, kind)[0]))
    alpha = getattr(opt, "attention_alpha", None)
    if given("attention_alpha") and alpha is not None:
        users = [k for k in sorted(present) if not getattr(opt, f"{k}_attention_alpha", None)]
        if not users:
            warnings.append("attention_alpha is ignored: this model has no Transformer attention that takes it")
        elif not learn and all(_alpha_ignored("attention_alpha", alpha, attention_spec(opt, k)[0]) for k in users):
            warnings.append(_alpha_ignored("attention_alpha", alpha, attention_spec(opt, users[0])[0]))
    if given("bisect_iter") and getattr(opt, "bisect_iter", None) is not None:
        used = [gen] + ([glob] if rnn_decoder else []) + [attention_spec(opt, k)[0] for k in present]
        if "entmax_bisect" not in used and not learn:
            warnings.append("bisect_iter is ignored: no mapping of this model bisects (only entmax_bisect does)")
    return [m for m in errors if m], [m for m in warnings if m]


def check_applicable(opt, names: Optional[set] = None, where: str = "",
                     warn: Optional[Callable[[str], None]] = None) -> list[str]:
    """``inapplicable_options`` enforced, the same for both toolkits: raise ``EntmaxOptionError`` (one line)
    for a sparse function the model does not have; pass each warning (an alpha, tau or bisect_iter the
    model ignores) to ``warn`` (the toolkit's logger) and return them. ``where`` prefixes each message."""
    errors, warnings = inapplicable_options(opt, names)
    if errors:
        raise EntmaxOptionError(f"{where}{'; '.join(errors)}")
    for message in warnings:
        if warn is not None:
            warn(f"{where}{message}")
    return warnings


# --- stock options whose bad values reach the plugin's math (refused when the run's options are read) ----
def check_label_smoothing(value, name: str = "label_smoothing") -> None:
    """eps in [0, 1): the target (1 - eps) e_y + eps u. At eps = 1 the target no longer depends on the
    reference word (nothing is learnt); outside [0, 1] it is no distribution (the loss refuses it at the
    first step, after the model and the data are built)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1):
        raise EntmaxOptionError(f"{name} must be a number in [0, 1), got {value!r}")


def check_search_sizes(opt) -> None:
    """beam_size >= 1 and n_best >= 1, integers: 0 or less fails inside the toolkit's beam search (a
    traceback). An n_best above beam_size is no error: the search runs until n_best hypotheses end."""
    for name in ("beam_size", "n_best"):
        value = getattr(opt, name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise EntmaxOptionError(f"{name} must be an integer >= 1, got {value!r}")


def generator_transformation(opt) -> Transformation:
    """The output layer's transformation from the options (a deferred tau stays unset)."""
    tau = getattr(opt, "generator_tau", None)
    return get_transformation(getattr(opt, "generator_function", "softmax"),
                              alpha=getattr(opt, "generator_alpha", None),
                              tau=None if tau in DEFERRED_TAU else tau, n_iter=getattr(opt, "bisect_iter", None),
                              option="generator_function")
