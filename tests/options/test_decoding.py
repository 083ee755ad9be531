"""``DecodingConfig`` is generated from the decoding rows of the option table: a row added there is a field
that ``from_opts`` reads, with the row's default where the opt lacks it, and no other edit."""
import argparse
import dataclasses

from onmt_entmax.options import DECODING_OPTIONS, Option
from onmt_entmax.options.decoding import DecodingConfig, decoding_config_class
from onmt_entmax.registry import get_transformation

EXTRA = Option("toy_depth", int, 7, "A decoding option no release has, to add to the table.", "decoding")
ENTMAX = [get_transformation("entmax15")]


def test_a_row_added_to_the_decoding_table_is_a_field_from_opts_reads():
    extended = decoding_config_class(DECODING_OPTIONS + (EXTRA,))
    assert extended().toy_depth == 7 and extended.toy_depth == 7
    assert extended.from_opts(argparse.Namespace(toy_depth=3), ENTMAX).toy_depth == 3
    assert extended.from_opts(argparse.Namespace(), ENTMAX).toy_depth == 7  # an opt without it: the row's default
    assert not hasattr(DecodingConfig(), "toy_depth")


def test_the_config_keeps_what_the_model_and_the_search_decide_beside_the_rows():
    names = [f.name for f in dataclasses.fields(DecodingConfig)]
    assert names == ["sparse_output", "unnormalised", *(o.name for o in DECODING_OPTIONS), "plain_scores",
                     "length_penalty"]
    plain = DecodingConfig()
    assert not plain.active and not plain.needs_scorer and plain.plain_scores and plain == DecodingConfig()
    resolved = DecodingConfig.from_opts(argparse.Namespace(length_penalty="avg", entmax_report="r.jsonl"), ENTMAX)
    assert resolved.sparse_output and resolved.certificate and resolved.active and not resolved.plain_scores
    assert resolved.length_penalty == "avg" and resolved.entmax_report == "r.jsonl"
