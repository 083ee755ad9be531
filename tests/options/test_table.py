"""The option table (``options.table``): each option declared once, each row a value the adapters can render
(its default of its type, within its choices and bounds), the command-line parser of a number-or-word option."""
import pytest

from onmt_entmax.options import (
    DECODING_OPTIONS,
    MODEL_OPTIONS,
    OPTIONS,
    SECTIONS,
    TOOLKITS,
    TRAINING_OPTIONS,
    model_option_names,
)
from onmt_entmax.registry import transformation_names


def test_each_option_is_declared_once_in_the_table_of_its_section():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    for table, section in ((MODEL_OPTIONS, "model"), (TRAINING_OPTIONS, "training"), (DECODING_OPTIONS, "decoding")):
        assert table and {o.section for o in table} == {section}
    assert OPTIONS == MODEL_OPTIONS + TRAINING_OPTIONS + DECODING_OPTIONS
    assert model_option_names() == [o.name for o in MODEL_OPTIONS]


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_each_row_is_one_the_adapters_can_render(option):
    assert option.section in SECTIONS and option.toolkits and set(option.toolkits) <= set(TOOLKITS)
    assert set(option.toolkit_help) <= set(option.toolkits)
    assert option.type in (bool, int, float, str)
    for toolkit in option.toolkits:
        assert option.help_for(toolkit).strip() and "\n" not in option.help_for(toolkit)
    if option.type is bool:
        assert option.default is False and option.choices is None  # a flag
    elif option.default is not None:
        assert type(option.default) is option.type
        assert option.minimum is None or option.default >= option.minimum
    if option.choices is not None:
        assert option.type is str and option.choice_names()
        assert option.default is None or option.default in option.choice_names()
    assert not (option.stock or option.on_decoder or option.override_help) or option.section == "model"


def test_function_choices_come_from_the_registry():
    rows = {o.name: o for o in MODEL_OPTIONS}
    assert rows["generator_function"].choice_names() == transformation_names()
    for name in ("attention_function", "global_attention_function", "enc_attention_function"):
        assert rows[name].choice_names() == transformation_names(for_attention=True)
    assert "alpha_relu" in rows["generator_function"].help_for("onmt")


def test_a_number_or_word_option_parses_a_finite_number_or_one_of_its_words():
    parse = next(o for o in OPTIONS if o.words).text_type()
    assert parse("auto") == "auto" and parse(" Formula ") == "formula" and parse("0.25") == 0.25
    for bad in ("autp", "inf", "nan", ""):
        with pytest.raises(ValueError):
            parse(bad)
    assert parse.__name__ == "number, 'auto' or 'formula'"  # argparse's "invalid number, 'auto' or ... value"
    assert [o.text_type() for o in OPTIONS if not o.words and o.type is not bool] == \
        [o.type for o in OPTIONS if not o.words and o.type is not bool]
