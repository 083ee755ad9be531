"""The Entmax options: in -h under their group, stored defaults, and every bad configuration refused
with a message naming the option (before any training starts)."""
import pytest

from onmt_testkit import build_vocab, run_console, train, yaml_config

from onmt_entmax.onmt.options import model_option_names
from onmt_entmax.options import OPTIONS, of_toolkit


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
    (dict(generator_function="entmax_bisect", bisect_iter=10**9), r"bisect_iter must be an integer in \[1, 200\]"),
    (dict(generator_function="entmax_bisect", generator_alpha=1e39), "generator_alpha"),  # inf in float32: NaN loss
    (dict(generator_function="alpha_relu", generator_tau=-1e39), "generator_tau"),
    (dict(label_smoothing=2), "label_smoothing"),  # (was a ValueError of the loss at the first step)
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


@pytest.mark.parametrize("command,args", [
    ("train", ["-config", "{config}"]),  # a misspelled key: "did you mean 'generator_function'?"
    ("translate", ["-model", "m.pt", "-src", "s.txt", "-generator_function", "entmax16"]),  # a bad choice
    ("build_vocab", ["-config", "{config}", "-n_sample", "many"]),
])
def test_a_usage_error_is_one_line_without_the_usage(toy, capsys, command, args):
    """Upstream prints some 200 lines of usage above the error."""
    import importlib

    config = yaml_config(toy, dict(generator_fuction="entmax15"), steps=1)
    parser = importlib.import_module(f"onmt.bin.{command}")._get_parser()
    with pytest.raises(SystemExit) as stop:
        parser.parse_known_args([a.format(config=config) for a in args])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert stop.value.code == 2 and len(lines) == 1, lines
    assert {"train": "generator_fuction", "translate": "entmax16", "build_vocab": "n_sample"}[command] in lines[0]


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


def _model_opt(**kw):
    import argparse

    base = dict(encoder_type="rnn", decoder_type="rnn", generator_function="softmax",
                global_attention_function="softmax", attention_function="softmax", learn_alpha=False)
    return argparse.Namespace(**{n: None for n in model_option_names()} | base | kw)


TRANSFORMER = dict(encoder_type="transformer", decoder_type="transformer")
IGNORED = [  # (model options, errors, warnings) as substrings
    (dict(attention_function="entmax15"), ["attention_function entmax15 does not apply"], []),
    (dict(encoder_type="transformer", attention_function="entmax15"), [], []),  # the encoder takes it
    (dict(context_attention_function="sparsemax", encoder_type="transformer"),
     ["context_attention_function sparsemax does not apply"], []),
    (dict(TRANSFORMER, global_attention_function="entmax15"), ["global_attention_function entmax15 does not apply"],
     []),
    (dict(generator_function="entmax15", generator_alpha=1.3), [],
     ["generator_alpha=1.3 is ignored: entmax15 has alpha 1.5"]),
    (dict(generator_function="entmax15", generator_alpha=1.5), [], []),  # its own alpha: nothing ignored
    (dict(generator_function="entmax_bisect", generator_alpha=1.3), [], []),
    (dict(generator_function="sparsemax", generator_tau=0.5), [], ["generator_tau is ignored"]),
    (dict(generator_function="alpha_relu", generator_tau=0.5), [], []),
    (dict(global_attention_function="entmax15", global_attention_alpha=1.2), [], ["global_attention_alpha=1.2"]),
    (dict(TRANSFORMER, attention_function="entmax15", attention_alpha=1.4), [], ["attention_alpha=1.4 is ignored"]),
    (dict(TRANSFORMER, attention_function="entmax15", attention_alpha=1.4, learn_alpha=True), [], []),  # its start
    (dict(TRANSFORMER, attention_function="entmax15", enc_attention_function="entmax_bisect", attention_alpha=1.4),
     [], []),  # taken by the encoder
    (dict(generator_function="entmax15", bisect_iter=20), [], ["bisect_iter is ignored"]),
    (dict(global_attention_function="entmax_bisect", bisect_iter=20), [], []),
]


@pytest.mark.parametrize("model,errors,warnings", IGNORED, ids=[str(i) for i in range(len(IGNORED))])
def test_an_option_the_model_would_ignore_is_named(model, errors, warnings):
    from onmt_entmax.onmt.validation import inapplicable_options

    got_errors, got_warnings = inapplicable_options(_model_opt(**model))
    assert len(got_errors) == len(errors) and all(e in g for e, g in zip(errors, got_errors))
    assert len(got_warnings) == len(warnings) and all(w in g for w, g in zip(warnings, got_warnings))


def test_onmt_train_refuses_a_sparse_attention_an_rnn_does_not_have_and_warns_of_an_ignored_alpha(toy, caplog):
    config = yaml_config(toy, dict(encoder_type="brnn", decoder_type="rnn", hidden_size=8, word_vec_size=8,
                                   attention_function="entmax15"), steps=1)
    with pytest.raises(ValueError, match="attention_function entmax15 does not apply.*global_attention_function"):
        train(config)
    config = yaml_config(toy, dict(encoder_type="brnn", decoder_type="rnn", hidden_size=8, word_vec_size=8,
                                   generator_function="entmax15", generator_alpha=1.3), steps=1)
    build_vocab(config)
    with caplog.at_level("WARNING"):
        train(config)
    assert "generator_alpha=1.3 is ignored: entmax15 has alpha 1.5 by definition" in caplog.text


def test_valid_lr_halving_without_validation_data_is_refused(toy):
    config = yaml_config(toy, dict(hidden_size=8, word_vec_size=8), steps=1, extra="valid_lr_halving: true\n")
    text = config.read_text()
    config.write_text("\n".join(line for line in text.splitlines() if not line.strip().startswith("valid:")) + "\n")
    build_vocab(config)
    with pytest.raises(ValueError, match="valid_lr_halving .* there is no validation data"):
        train(config)


# one option breaking each training check of onmt_train, in the order of the checks' rows in patches.py
BROKEN_TRAINING = {"valid_lr_halving": ["-valid_lr_halving"],  # (the corpora below have no 'valid')
                   "rnn_cuda_graphs": ["-rnn_cuda_graphs", "-decoder_type", "transformer"],
                   "embeddings_dropout": ["-embeddings_dropout", "2"], "adam_eps": ["-adam_eps", "0"],
                   "adam_fused": ["-adam_fused"], "save_model": ["-save_model", "{file}/model"],
                   "label_smoothing": ["-label_smoothing", "2"]}


@pytest.mark.parametrize("first", range(len(BROKEN_TRAINING)), ids=list(BROKEN_TRAINING))
def test_of_several_broken_training_options_the_first_checks_refusal_is_the_one_given(tmp_path, first):
    """validate_train_opts with the options of ``BROKEN_TRAINING`` from ``first`` on all broken: the refusal names
    the first of them, whichever row of the table its check is."""
    from onmt.bin.train import _get_parser
    from onmt.utils.parse import ArgumentParser

    (tmp_path / "a_file").write_text("x\n")
    names = list(BROKEN_TRAINING)[first:]
    args = [a.format(file=tmp_path / "a_file") for name in names for a in BROKEN_TRAINING[name]]
    data = "{'corpus_1': {'path_src': 's', 'path_tgt': 't'}}"
    opt = _get_parser().parse_known_args(["-data", data, "-src_vocab", "v", *args])[0]
    with pytest.raises(ValueError, match=rf"^-?{names[0]}\b"):
        ArgumentParser.validate_train_opts(opt)


def test_train_from_names_the_model_options_the_checkpoint_replaces(toy, caplog):
    import torch

    model = dict(encoder_type="brnn", decoder_type="rnn", hidden_size=8, word_vec_size=8,
                 generator_function="entmax15", global_attention_function="entmax15")
    config = yaml_config(toy, model, steps=2)
    build_vocab(config)
    train(config)
    with caplog.at_level("WARNING"):
        train(config, "-train_from", str(toy / "run/model_step_2.pt"), "-train_steps", "3")
    assert "generator_function" not in caplog.text  # resumed with the same options: nothing to say
    with caplog.at_level("WARNING"):
        train(config, "-train_from", str(toy / "run/model_step_2.pt"), "-train_steps", "3",
              "-generator_function", "sparsemax", "-hidden_size", "16", "-embeddings_dropout", "0")
    assert ("-train_from uses the checkpoint's model options; these given ones are ignored (-override_opts would use "
            "them): embeddings_dropout=0.0 (checkpoint: None), generator_function='sparsemax' (checkpoint: "
            "'entmax15'), hidden_size=16 (checkpoint: 8)" in caplog.text)
    assert torch.load(toy / "run/model_step_3.pt")["opt"].generator_function == "entmax15"


def _translate_opt(tmp_path, monkeypatch, *args):
    """onmt_translate's first step, before the model loads: parse, then ArgumentParser.validate_translate_opts."""
    from onmt.bin.translate import _get_parser
    from onmt.utils.parse import ArgumentParser

    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.pt").write_bytes(b"weights")
    (tmp_path / "src.txt").write_text("a b\n")
    opt = _get_parser().parse_args(["-model", "model.pt", "-src", "src.txt", *args])
    ArgumentParser.validate_translate_opts(opt)
    return opt


@pytest.mark.parametrize("args,option", [(["-beam_size", "0"], "beam_size"), (["-beam_size", "-2"], "beam_size"),
                                         (["-n_best", "0"], "n_best")])
def test_onmt_translate_refuses_a_search_of_no_hypothesis_before_the_model_loads(tmp_path, monkeypatch, args, option):
    """Upstream's beam search fails on these with a traceback (step must be nonzero; list index out of range)."""
    from onmt_entmax.errors import EntmaxOptionError

    with pytest.raises(EntmaxOptionError, match=option):
        _translate_opt(tmp_path, monkeypatch, *args)
    _translate_opt(tmp_path, monkeypatch, "-beam_size", "2", "-n_best", "3")  # more than the beam: upstream copes


@pytest.mark.parametrize("args,option", [(["-generator_alpha", "1e39"], "generator_alpha"),
                                         (["-generator_alpha", "1.3", "-bisect_iter", "0"], "bisect_iter")])
def test_onmt_translate_override_the_math_cannot_use_is_refused(tmp_path, monkeypatch, args, option):
    """-generator_alpha 1e39 used to decode empty lines with status 0 (the alpha is inf in float32)."""
    from onmt_entmax.errors import EntmaxOptionError
    from onmt_entmax.onmt.model.loading import apply_overrides, overrides_from

    opt = _translate_opt(tmp_path, monkeypatch, *args)
    model_opt = _model_opt(generator_function="entmax_bisect", generator_alpha=1.5)
    with pytest.raises(EntmaxOptionError, match=option):
        apply_overrides(model_opt, overrides_from(opt))


@pytest.mark.parametrize("model,option", [
    (dict(generator_function="entmax_bisect", generator_alpha=1e39), "generator_alpha"),
    (dict(global_attention_function="entmax_bisect", global_attention_alpha=float(2 ** 128)), "global_attention_alpha"),
    (dict(generator_function="entmax_bisect", generator_alpha=True), "generator_alpha"),
    (dict(generator_function="entmax_bisect", bisect_iter=True), "bisect_iter"),
    (dict(generator_function="alpha_relu", generator_tau=True), "generator_tau"),
])
def test_option_values_the_math_cannot_use_are_refused_naming_the_option(model, option):
    from onmt_entmax.errors import EntmaxOptionError
    from onmt_entmax.onmt.validation import validate_entmax_opts

    with pytest.raises(EntmaxOptionError, match=option):
        validate_entmax_opts(_model_opt(**model))


# --- the option table, as onmt_train / onmt_translate render it ----------------------------------------
@pytest.fixture(scope="module")
def parsers():
    from onmt.bin.train import _get_parser as train_parser
    from onmt.bin.translate import _get_parser as translate_parser

    return {"train": train_parser(), "translate": translate_parser()}


def _entmax_action(parser, name):
    group = next(g for g in parser._action_groups if g.title == "Entmax")
    return next(a for a in group._group_actions if a.dest == name)


def _renderings(option):
    """(parser, as an onmt_translate override) pairs where ``option`` must appear."""
    out = [({"model": "train", "training": "train", "decoding": "translate"}[option.section], False)]
    return out + ([("translate", True)] if option.override_help is not None else [])


def _value_of(option):
    """A value of the row's type, as a command line writes it, and what it parses to."""
    return {bool: None, int: ("3", 3), float: ("1.25", 1.25), str: ("out.txt", "out.txt")}[option.type]


@pytest.mark.parametrize("option", of_toolkit(OPTIONS, "onmt"), ids=lambda o: o.name)
def test_each_option_of_the_table_is_in_the_entmax_group_with_the_tables_type_default_choices_and_help(parsers,
                                                                                                        option):
    for command, override in _renderings(option):
        action = _entmax_action(parsers[command], option.name)
        assert set(action.option_strings) == {f"--{option.name}", f"-{option.name}"}
        assert action.help == (option.override_help if override else option.help_for("onmt"))
        if option.type is bool:
            assert (action.nargs, action.const, action.default) == (0, True, False)  # a flag
            continue
        assert action.default == (None if override else option.default)
        assert (list(action.choices) if action.choices is not None else None) == option.choice_names()
        parse = action.type or str
        for word in option.words:
            assert parse(word) == word
        if option.choices is None:
            text, value = _value_of(option)
            assert parse(text) == value and type(parse(text)) is option.type
        if option.type in (int, float):
            with pytest.raises(ValueError):
                parse("many")


@pytest.mark.parametrize("option", [o for o in of_toolkit(OPTIONS, "onmt") if o.choices or o.type in (int, float)],
                         ids=lambda o: o.name)
def test_a_value_outside_an_options_choices_or_type_is_refused_in_one_line_naming_it(parsers, capsys, option):
    command = "translate" if option.section == "decoding" else "train"
    with pytest.raises(SystemExit) as exit_:
        parsers[command].parse_known_args([f"-{option.name}", "entmax16" if option.choices else "many"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --{option.name}/-{option.name}: invalid" in err and err.count("\n") == 1
