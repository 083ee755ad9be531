"""The Entmax options: in -h under their group, stored defaults, and every bad configuration refused
with a message naming the option (before any training starts)."""
import pytest

from conftest import run_console, train, yaml_config

from onmt_entmax.onmt.options import model_option_names


def _help(parser_factory):
    parser = parser_factory()
    return parser.format_help()


def test_train_and_translate_help_show_the_entmax_group():
    from onmt.bin.train import _get_parser as train_parser
    from onmt.bin.translate import _get_parser as translate_parser

    train_help, translate_help = _help(train_parser), _help(translate_parser)
    for text in (train_help, translate_help):
        section = text.split("Entmax:", 1)[1]
        for name in ("generator_function", "generator_alpha", "generator_tau", "bisect_iter",
                     "global_attention_function", "global_attention_alpha", "attention_function", "attention_alpha"):
            assert f"--{name}" in section
    assert "--learn_alpha" in train_help.split("Entmax:", 1)[1]
    assert "alpha_relu" in train_help.split("--generator_function", 1)[1]


def test_stock_checkpoint_options_get_our_defaults():
    import argparse

    from onmt.utils.parse import ArgumentParser

    opt = ArgumentParser.ckpt_model_opts(argparse.Namespace(encoder_type="rnn"))
    assert opt.generator_function == "softmax" and opt.attention_function == "softmax"
    assert opt.learn_alpha is False and opt.generator_tau is None


BAD = [
    (dict(generator_function="entmax_bisect", generator_alpha=0.7), "generator_alpha"),
    (dict(global_attention_function="entmax_bisect", global_attention_alpha=0.9), "global_attention_alpha"),
    (dict(encoder_type="transformer", decoder_type="transformer", attention_function="entmax_bisect",
          attention_alpha=0.5), "attention_alpha"),
    (dict(copy_attn=True, generator_function="sparsemax"), "copy_attn"),
    (dict(encoder_type="transformer", decoder_type="transformer", learn_alpha=True), "learn_alpha"),
    (dict(encoder_type="transformer", decoder_type="transformer", attention_function="sparsemax", learn_alpha=True),
     "learn_alpha"),
    (dict(generator_function="alpha_relu"), "generator_tau"),
    (dict(bisect_iter=0), "bisect_iter"),
]


@pytest.mark.parametrize("model,option", BAD, ids=[o + str(i) for i, (_, o) in enumerate(BAD)])
def test_bad_configuration_fails_naming_the_option(toy, model, option):
    config = yaml_config(toy, dict(hidden_size=8, word_vec_size=8, **model), steps=1)
    with pytest.raises(ValueError, match=option):
        train(config)


@pytest.mark.parametrize("key,value,message", [
    ("generator_function", "entmax16", "invalid choice: 'entmax16'"),
    ("attention_function", "alpha_relu", "invalid choice: 'alpha_relu'"),
    ("generator_alhpa", "1.3", "unknown option 'generator_alhpa'; did you mean 'generator_alpha'"),
    ("attention_funtion", "entmax15", "did you mean 'attention_function'"),
    ("generator_tau", "often", "generator_tau"),
])
def test_unknown_names_and_misspelled_keys_are_refused(toy, capsys, key, value, message):
    config = yaml_config(toy, {key: value}, steps=1)
    with pytest.raises(SystemExit):
        train(config)
    assert message in capsys.readouterr().err


def test_real_onmt_train_refuses_a_misspelled_key_instead_of_ignoring_it(toy):
    """Stock onmt_train would silently train a softmax model here."""
    config = yaml_config(toy, dict(generator_functoin="entmax15"), steps=1)
    proc = run_console(["onmt_train", "-config", str(config)], cwd=toy, timeout=120)
    assert proc.returncode != 0
    assert "did you mean 'generator_function'" in proc.stderr


def test_every_option_is_documented_in_one_place():
    names = model_option_names()
    assert len(names) == len(set(names))
    assert {"generator_function", "learn_alpha", "context_attention_function"} <= set(names)
