"""Translate-time decoding options: parsing and the clear refusals of the issue."""
import argparse

import pytest

pytest.importorskip("onmt")

import onmt_entmax.onmt.options as onmt_options  # noqa: E402
from onmt_entmax.onmt.options import add_decoding_options  # noqa: E402
from onmt_entmax.options import DECODING_OPTIONS, OPTIONS, Option  # noqa: E402
from onmt_entmax.options.decoding import DecodingConfig, decoding_config_class  # noqa: E402
from onmt_entmax.registry import get_transformation  # noqa: E402


def _opt(**kw):
    parser = argparse.ArgumentParser()
    parser.add = parser.add_argument  # configargparse's alias, used by OpenNMT-py option code
    add_decoding_options(parser)
    add_decoding_options(parser)  # idempotent
    ns = parser.parse_args([])
    for k, v in kw.items():
        setattr(ns, k, v)
    return ns


ENTMAX = [get_transformation("entmax15")]
RELU = [get_transformation("alpha_relu", alpha=1.5, tau=0.3)]


def test_sparse_models_get_certificates_by_default_dense_models_nothing():
    assert DecodingConfig.from_opts(_opt(), ENTMAX).certificate
    dense = DecodingConfig.from_opts(_opt(), [None])
    assert not dense.certificate and not dense.active


def test_certificate_asked_of_a_dense_model_names_the_problem():
    with pytest.raises(ValueError, match="-certificate needs a sparse output layer.*softmax"):
        DecodingConfig.from_opts(_opt(certificate=True), [None])


def test_enumeration_of_a_dense_model_and_bad_cap_are_refused():
    with pytest.raises(ValueError, match="-enumerate_support needs a sparse output layer"):
        DecodingConfig.from_opts(_opt(enumerate_support=True), [get_transformation("softmax")])
    with pytest.raises(ValueError, match="-enumerate_cap must be >= 1"):
        DecodingConfig.from_opts(_opt(enumerate_support=True, enumerate_cap=0), ENTMAX)


def test_an_ensemble_is_sparse_only_if_every_member_is():
    assert DecodingConfig.from_opts(_opt(), ENTMAX * 2).sparse_output
    assert not DecodingConfig.from_opts(_opt(), ENTMAX + [None]).sparse_output


def test_alpha_relu_exact_search_is_refused_and_optimality_not_claimed():
    with pytest.raises(ValueError, match="-exact_search needs a normalised output layer"):
        DecodingConfig.from_opts(_opt(exact_search=True), RELU)
    cfg = DecodingConfig.from_opts(_opt(), RELU)
    assert cfg.unnormalised and cfg.certificate


@pytest.mark.parametrize("penalties,plain", [
    (dict(length_penalty="none", coverage_penalty="none"), True),
    (dict(length_penalty="avg", coverage_penalty="none"), False),
    (dict(length_penalty="wu", coverage_penalty="none"), False),
    (dict(length_penalty="none", coverage_penalty="wu"), False),  # a coverage bonus can lift a completion
    (dict(length_penalty="none", coverage_penalty="summary"), False),
])
def test_any_length_or_coverage_penalty_disables_the_optimality_bound(penalties, plain):
    assert DecodingConfig.from_opts(_opt(**penalties), ENTMAX).plain_scores is plain


def test_enumerate_cap_defaults_to_100_in_onmt_translate():
    from onmt.bin.translate import _get_parser

    opt = _get_parser().parse_args(["-model", "m.pt", "-src", "s.txt"])
    assert opt.enumerate_cap == 100 == DecodingConfig.enumerate_cap
    assert DecodingConfig.from_opts(opt, ENTMAX).enumerate_cap == 100
    assert opt.exact_max_expansions == 20000 and opt.forced_max_support == 50


def test_a_decoding_row_added_to_the_table_is_an_onmt_translate_option_its_config_reads(monkeypatch):
    from onmt.bin.translate import _get_parser

    extra = Option("toy_depth", int, 7, "A decoding option no release has, to add to the table.", "decoding")
    monkeypatch.setattr(onmt_options, "OPTIONS", OPTIONS + (extra,))  # the table with one more row
    parser = _get_parser()
    assert "--toy_depth" in parser.format_help().split("Entmax:", 1)[1]
    opt = parser.parse_args(["-model", "m.pt", "-src", "s.txt", "-toy_depth", "3"])
    assert decoding_config_class(DECODING_OPTIONS + (extra,)).from_opts(opt, ENTMAX).toy_depth == 3
    assert parser.parse_args(["-model", "m.pt", "-src", "s.txt"]).toy_depth == 7
