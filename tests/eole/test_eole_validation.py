"""The option checks Eole shares with OpenNMT-py (``options/model.py``): what ``onmt_train`` /
``onmt_translate`` refuse, ``eole train`` / ``eole predict`` refuse when the config is read, naming the
option; what one warns of, the other does."""
import argparse
import logging
import re

import pytest
import yaml
from eole.config.run import PredictConfig, TrainConfig
from pydantic import ValidationError

from onmt_entmax.eole.validation import check_model_config, check_predict_config, check_train_config, describe
from onmt_entmax.errors import ConfigError

TINY = {"architecture": "transformer", "layers": 1, "heads": 2, "hidden_size": 16, "transformer_ff": 32}
RNN = {"architecture": "rnn", "layers": 1, "hidden_size": 16}


def _train(model: dict, **training) -> TrainConfig:
    return TrainConfig(src_vocab="v.src", tgt_vocab="v.tgt", data={}, model=model, training=training)


@pytest.mark.parametrize("model,training,option", [
    ({**TINY, "global_attention_function": "sparsemax"}, {}, "global_attention_function"),  # an RNN's attention
    ({**RNN, "attention_function": "entmax15"}, {}, "attention_function"),  # a Transformer's attention
    ({**TINY, "architecture": "transformer_lm", "context_attention_function": "entmax15"}, {},
     "context_attention_function"),  # a decoder alone has no context attention
    (TINY, {"label_smoothing": 2}, "label_smoothing"),
    (TINY, {"label_smoothing": 1.0}, "label_smoothing"),  # a target that ignores the reference word
])
def test_an_option_the_model_does_not_have_or_cannot_use_is_refused_before_training(model, training, option):
    with pytest.raises(ConfigError, match=option):
        check_train_config(_train(model, **training))


def test_an_ignored_alpha_is_warned_of_as_onmt_train_does(caplog):
    cfg = _train({**TINY, "generator_function": "entmax15", "generator_alpha": 1.3, "bisect_iter": 20})
    with caplog.at_level(logging.WARNING):
        warnings = check_train_config(cfg)
    assert any("generator_alpha" in w for w in warnings) and any("bisect_iter" in w for w in warnings)
    assert "generator_alpha" in caplog.text
    assert check_train_config(_train({**TINY, "generator_function": "entmax_bisect", "generator_alpha": 1.3})) == []


@pytest.mark.parametrize("model,option", [
    ({"generator_function": "entmax_bisect", "generator_alpha": 1e39}, "generator_alpha"),  # inf in float32
    ({"attention_function": "entmax_bisect", "attention_alpha": 1e39}, "attention_alpha"),
    ({"generator_function": "alpha_relu", "generator_tau": -1e39}, "generator_tau"),
])
def test_a_value_that_is_inf_in_float32_is_refused_naming_the_option(model, option):
    """Eole trained these with loss nan: finite Python floats, inf in the dtype the mappings compute in."""
    with pytest.raises(ConfigError, match=option):
        check_model_config(_train({**TINY, **model}).model)


@pytest.mark.parametrize("option", ["generator_alpha", "attention_alpha", "enc_attention_alpha", "bisect_iter",
                                    "generator_tau"])
def test_a_yaml_boolean_is_no_number(option):
    """pydantic's lax mode read ``generator_alpha: true`` as 1.0 (softmax) and ``bisect_iter: true`` as one
    iteration; OpenNMT-py refuses both."""
    with pytest.raises(ValidationError) as err:
        _train({**TINY, "generator_function": "entmax_bisect", option: True})
    assert option in describe(err.value) and "\n" not in describe(err.value)


@pytest.mark.parametrize("option", ["enumerate_cap", "heatmap_sentence"])
def test_a_yaml_boolean_is_no_number_for_the_decoding_options_either(option):
    with pytest.raises(ValidationError) as err:
        PredictConfig(model_path=["m"], src="s.txt", **{option: True})
    assert option in describe(err.value)
    assert getattr(PredictConfig(model_path=["m"], src="s.txt", **{option: 3}), option) == 3


@pytest.mark.parametrize("args,option", [({"beam_size": 0}, "beam_size"), ({"n_best": 0}, "n_best")])
def test_predict_refuses_a_search_of_no_hypothesis(args, option):
    """Eole's beam search fails on these with a traceback; an n_best above beam_size it copes with."""
    with pytest.raises(ConfigError, match=option):
        check_predict_config(PredictConfig(model_path=["m"], src="s.txt", **args))
    check_predict_config(PredictConfig(model_path=["m"], src="s.txt", beam_size=2, n_best=3))


def test_eole_train_and_predict_run_these_checks_when_they_read_the_config(tmp_path, monkeypatch):
    from eole.bin.run.predict import Predict
    from eole.bin.run.train import Train

    monkeypatch.chdir(tmp_path)
    (tmp_path / "src.txt").write_text("a b\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model": {"architecture": "rnn"}}')
    config = {"src_vocab": "v.src", "tgt_vocab": "v.tgt", "training": {"model_path": "run/model"},
              "data": {"corpus_1": {"path_src": "src.txt", "path_tgt": "src.txt"}},
              "model": {**TINY, "global_attention_function": "sparsemax"}}
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(config))
    predict = ["-model_path", "model", "-src", "src.txt", "-beam_size", "0"]
    for command, args, option in [(Train, ["-config", "train.yaml"], "global_attention_function"),
                                  (Predict, predict, "beam_size")]:
        parser = argparse.ArgumentParser()
        command.add_args(parser)
        with pytest.raises(ConfigError, match=option):
            command.build_config(parser.parse_args(args))


# one setting breaking each check of the config eole train builds, in the order of the checks' rows in patches.py
BROKEN_TRAINING = {"model": {"model": {"generator_function": "alpha_relu"}},  # (without generator_tau)
                   "training.rnn_cuda_graphs": {"training": {"rnn_cuda_graphs": True}, "model": {"input_feed": 0}},
                   "training.valid_lr_halving": {"training": {"valid_lr_halving": True}},  # (no 'valid' corpus)
                   "training.adam_fused": {"training": {"adam_fused": True, "optim": "sgd"}},
                   "training.label_smoothing": {"training": {"label_smoothing": 2}},
                   "data.corpus_1.path_src": {"data": {"corpus_1": {"path_src": "missing.txt"}}}}


@pytest.mark.parametrize("first", range(len(BROKEN_TRAINING)), ids=list(BROKEN_TRAINING))
def test_of_several_broken_training_settings_the_first_checks_refusal_is_the_one_given(tmp_path, monkeypatch, first):
    """eole train's config with the settings of ``BROKEN_TRAINING`` from ``first`` on all broken: the refusal
    names the first of them, whichever row of the table its check is."""
    from eole.bin.run.train import Train

    monkeypatch.chdir(tmp_path)
    (tmp_path / "src.txt").write_text("a b\n")
    config = {"src_vocab": "v.src", "tgt_vocab": "v.tgt", "training": {"model_path": "run/model"},
              "data": {"corpus_1": {"path_src": "src.txt", "path_tgt": "src.txt"}}, "model": dict(RNN)}
    names = list(BROKEN_TRAINING)[first:]
    for name in names:
        for section, settings in BROKEN_TRAINING[name].items():
            for key, value in settings.items():
                config[section][key] = {**config[section][key], **value} if isinstance(value, dict) else value
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(config))
    parser = argparse.ArgumentParser()
    Train.add_args(parser)
    with pytest.raises(ConfigError, match=rf"^{re.escape(names[0])}\b"):
        Train.build_config(parser.parse_args(["-config", "train.yaml"]))
