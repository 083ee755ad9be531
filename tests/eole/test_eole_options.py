"""Our options in Eole's pydantic configs: each row of the option table a field as the row says, accepted
with the OpenNMT-py names and values, kept in ``config.json``, and refused with one line that names the
option when they are wrong."""
import json
import re

import pytest
import yaml
from eole.config import recursive_model_fields_set
from eole.config.models import build_model_config
from eole.config.run import PredictConfig, TrainConfig
from pydantic import ValidationError, create_model

from eole_testkit import CONFIGS

import onmt_entmax.eole.options as eole_options
from onmt_entmax.eole.options import family
from onmt_entmax.eole.validation import check_model_config, describe
from onmt_entmax.errors import ConfigError
from onmt_entmax.options import DECODING_OPTIONS, OPTIONS, Option, model_option_names, of_toolkit
from onmt_entmax.options.decoding import decoding_config_class
from onmt_entmax.registry import get_transformation

ENTMAX = [get_transformation("entmax15")]
TINY = {"architecture": "transformer", "layers": 1, "heads": 2, "hidden_size": 16, "transformer_ff": 32}


def _train(model: dict) -> TrainConfig:
    return TrainConfig(src_vocab="v.src", tgt_vocab="v.tgt", data={}, model=model)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_example_configs_are_valid_eole_configs(path):
    cfg = TrainConfig(**yaml.safe_load(path.read_text()))
    assert cfg.model.generator_function != "softmax" or cfg.model.attention_function != "softmax"
    check_model_config(cfg.model)


def test_the_opennmt_py_names_and_values_are_model_options_and_survive_config_json():
    options = {"generator_function": "alpha_relu", "generator_alpha": 1.3, "generator_tau": "auto",
               "bisect_iter": 30, "attention_function": "entmax_bisect", "attention_alpha": 1.4,
               "context_attention_function": "sparsemax", "learn_alpha": True}
    cfg = _train({**TINY, **options})
    saved = json.loads(json.dumps(recursive_model_fields_set(cfg)))  # what TrainingModelSaver writes
    restored = TrainConfig(**{**saved, "data": {}})  # (as eole predict reads it back: get_metadata)
    for name, value in options.items():
        assert getattr(restored.model, name) == value, name
    assert set(model_option_names()) <= set(type(restored.model).model_fields)


def test_global_attention_function_reaches_the_rnn_decoder_from_the_model_section():
    cfg = build_model_config({"architecture": "rnn", "global_attention_function": "entmax_bisect",
                              "global_attention_alpha": 1.2})
    assert cfg.decoder.global_attention_function == "entmax_bisect"


@pytest.mark.parametrize("model, says", [
    ({"generator_function": "entmax16"}, "model.generator_function: Input should be 'softmax', 'sparsemax', "
                                         "'entmax15', 'entmax_bisect' or 'alpha_relu'"),
    ({"generator_alpha": 0.5}, "model.generator_alpha: Input should be greater than or equal to 1 (got 0.5)"),
    ({"attention_alpha": float("nan")}, "model.attention_alpha: Input should be a finite number"),
    ({"generator_alhpa": 1.2}, "model.generator_alhpa: unknown option; did you mean 'generator_alpha'?"),
    ({"attention_function": "alpha_relu"}, "model.attention_function: Input should be"),  # not a normalizer
    ({"bisect_iter": 0}, "model.bisect_iter: Input should be greater than or equal to 1"),
    ({"label_smoothing": 0.1}, "model.label_smoothing: unknown option here; it belongs in the training: section"),
])
def test_bad_values_and_misspelled_keys_are_refused_naming_the_option(model, says):
    with pytest.raises(ValidationError) as err:
        _train({**TINY, **model})
    assert says in describe(err.value, lambda: sorted(model_option_names()))
    assert "\n" not in describe(err.value)


def test_generator_tau_takes_a_number_auto_or_formula():
    assert build_model_config({**TINY, "generator_tau": "formula"}).generator_tau == "formula"
    assert build_model_config({**TINY, "generator_tau": "0.25"}).generator_tau == 0.25
    with pytest.raises(ValidationError) as err:
        build_model_config({**TINY, "generator_tau": "autp"})
    assert "generator_tau" in describe(err.value)


@pytest.mark.parametrize("model, says", [
    ({"learn_alpha": True}, "learn_alpha needs a sparse Transformer attention"),
    ({"learn_alpha": True, "attention_function": "sparsemax"}, "sparsemax (alpha = 2) is the upper end"),
    ({"generator_function": "alpha_relu"}, "generator_function alpha_relu needs generator_tau"),
    ({"architecture": "rnn", "learn_alpha": True, "attention_function": "entmax15"},
     "learn_alpha applies to Transformer attention"),
])
def test_options_that_contradict_each_other_are_refused_before_training(model, says):
    cfg = _train(model if model.get("architecture") == "rnn" else {**TINY, **model})
    with pytest.raises(ConfigError, match=re.escape(says)):
        check_model_config(cfg.model)


def test_predict_config_has_the_decoding_options_of_onmt_translate():
    fields = PredictConfig.model_fields
    for option in DECODING_OPTIONS:
        assert fields[option.name].default == option.default and fields[option.name].description == option.help
    with pytest.raises(ValidationError, match="exact_serch"):
        PredictConfig(model_path=["m"], src="s.txt", exact_serch=True)


def test_a_decoding_row_added_to_the_table_is_an_eole_predict_field_its_config_reads(monkeypatch):
    extra = Option("toy_depth", int, 7, "A decoding option no release has, to add to the table.", "decoding")
    monkeypatch.setattr(eole_options, "OPTIONS", OPTIONS + (extra,))  # the table with one more row
    added = eole_options.fields("decoding")  # what extend_configs puts in PredictConfig
    assert added["toy_depth"].default == 7 and added["toy_depth"].description == extra.help
    predict = create_model("Predict", __base__=PredictConfig, **{n: (f.annotation, f) for n, f in added.items()})
    config = predict(model_path=["m"], src="s.txt", toy_depth=3)
    assert decoding_config_class(DECODING_OPTIONS + (extra,)).from_opts(config, ENTMAX).toy_depth == 3
    with pytest.raises(ValidationError, match="toy_depth"):
        predict(model_path=["m"], src="s.txt", toy_depth="deep")


@pytest.fixture
def predict_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model": {"architecture": "rnn"}}')
    (tmp_path / "notes").mkdir()
    (tmp_path / "src.txt").write_text("a b\n\nc\n")  # (Eole keeps a blank source line: it is translated)
    (tmp_path / "tgt.txt").write_text("b a\nx\nc\n")
    return tmp_path


@pytest.mark.parametrize("args,says", [
    ({"output": "src.txt"}, "-output src.txt is the -src file: it would be written over"),
    ({"entmax_report": "pred.txt"}, "-entmax_report pred.txt is also -output: one would overwrite the other"),
    ({"output": "nowhere/pred.txt"}, "-output nowhere/pred.txt: the folder"),
    ({"src": "missing.txt"}, "-src missing.txt: no such file"),
    ({"tgt": "src.txt"}, "-tgt src.txt has blank lines (2): Eole skips those sentence pairs"),
    ({"attn_heatmap": "heat.pdf"}, "-attn_heatmap writes a PNG image"),
    ({"model_path": "src.txt"}, "-model_path src.txt is a file: give the model's folder"),
    ({"model_path": "notes"}, "-model_path notes: no config.json there, not an Eole model folder"),
    ({"model_path": "./runs/model"}, "-model_path ./runs/model: no such model folder"),
])
def test_predict_files_that_would_be_written_over_or_lose_lines_are_refused(predict_files, args, says):
    from onmt_entmax.eole.files import check_predict_files

    config = PredictConfig(**{"model_path": "model", "src": "src.txt", "output": "pred.txt", **args})
    with pytest.raises(ConfigError) as err:
        check_predict_files(config)
    assert says in str(err.value)
    check_predict_files(PredictConfig(model_path="model", src="src.txt", output="pred.txt", tgt="tgt.txt"))
    check_predict_files(PredictConfig(model_path="org/name", src="src.txt"))  # (maybe a Hugging Face model)


@pytest.mark.parametrize("option,inside", [("output", "model.00.safetensors"), ("entmax_report", "config.json"),
                                           ("log_file", "step_60/config.json"), ("dump_beam", "step_60/new.txt")])
def test_no_output_lands_inside_the_model_folder_through_its_links(tmp_path, monkeypatch, option, inside):
    """Eole's ``M/`` holds links to the files of ``M/step_N/``: an output naming one of them, a file of a
    step folder, or a new file there writes into the model, whichever spelling reaches it."""
    from onmt_entmax.eole.files import check_predict_files

    monkeypatch.chdir(tmp_path)
    step = tmp_path / "M" / "step_60"
    step.mkdir(parents=True)
    for name in ("config.json", "model.00.safetensors", "vocab.json"):
        (step / name).write_text('{"model": {"architecture": "rnn"}}')
        (tmp_path / "M" / name).symlink_to(f"step_60/{name}")
    (tmp_path / "link").symlink_to("M")
    (tmp_path / "src.txt").write_text("a b\n")
    for spelling in (f"M/{inside}", f"./M/{inside}", f"link/{inside}", str(tmp_path / "M" / inside)):
        with pytest.raises(ConfigError, match=f"-{option}"):
            check_predict_files(PredictConfig(model_path="M", src="src.txt", **{option: spelling}))
        with pytest.raises(ConfigError, match=f"-{option}"):  # the step folder itself as the model
            check_predict_files(PredictConfig(model_path="M/step_60", src="src.txt", **{option: spelling}))
    check_predict_files(PredictConfig(model_path="M", src="src.txt", **{option: "Mpred.txt"}))  # beside it: fine


def test_train_files_that_are_missing_or_in_the_models_way_are_refused_before_training(tmp_path, monkeypatch):
    from onmt_entmax.eole.files import check_train_files

    monkeypatch.chdir(tmp_path)
    for name in ("src.txt", "tgt.txt", "a_file"):
        (tmp_path / name).write_text("a\n")

    def config(training=None, **corpus):
        data = {"corpus_1": {"path_src": "src.txt", "path_tgt": "tgt.txt", **corpus}}
        return TrainConfig(src_vocab="v.src", tgt_vocab="v.tgt", data=data, model=TINY,
                           training={"model_path": "run/model", **(training or {})})

    check_train_files(config())
    check_train_files(config(path_src="hf://some/dataset"))  # (Eole fetches those)
    for cfg, says in [(config(path_tgt="missing.txt"), "data.corpus_1.path_tgt missing.txt: no such file"),
                      (config({"model_path": "a_file"}), "training.model_path a_file is a file"),
                      (config({"model_path": "a_file/model"}), "training.model_path a_file/model: "),
                      (config({"train_from": "run/model/step_9"}), "training.train_from run/model/step_9: no such")]:
        with pytest.raises(ConfigError) as err:
            check_train_files(cfg)
        assert str(err.value).startswith(says)


def test_train_and_build_vocab_never_write_what_they_read_nor_over_another_run(tmp_path, monkeypatch):
    """build_vocab's vocabularies and train's log file are no corpus file (``overwrite: true`` would replace
    the corpus); a model_path that holds another run's ``step_N/`` folders is refused unless train_from
    resumes that run."""
    from eole.config.run import BuildVocabConfig

    from onmt_entmax.eole.files import check_model_path_is_new, check_train_files

    monkeypatch.chdir(tmp_path)
    for name in ("src.txt", "tgt.txt"):
        (tmp_path / name).write_text("a\n")
    data = {"corpus_1": {"path_src": "src.txt", "path_tgt": "tgt.txt"}}

    def train(**training):
        return TrainConfig(src_vocab="v.src", tgt_vocab="v.tgt", data=data, model=TINY,
                           training={"model_path": "run/model", **training})

    for vocabs in ({"src_vocab": "src.txt", "tgt_vocab": "v.tgt"}, {"src_vocab": "v.src", "tgt_vocab": "./tgt.txt"}):
        with pytest.raises(ConfigError, match=r"_vocab \S+ is the data.corpus_1.path_(src|tgt) file"):
            check_train_files(BuildVocabConfig(data=data, overwrite=True, **vocabs))
    check_train_files(BuildVocabConfig(data=data, src_vocab="v", tgt_vocab="src.txt", share_vocab=True))
    with pytest.raises(ConfigError, match=r"^-log_file src.txt is the data.corpus_1.path_src file"):
        check_train_files(TrainConfig(src_vocab="v.src", tgt_vocab="v.tgt", data=data, model=TINY,
                                      log_file="src.txt", training={"model_path": "run/model"}))
    check_model_path_is_new(train())
    (tmp_path / "run" / "model" / "step_20").mkdir(parents=True)
    (tmp_path / "run" / "model" / "step_40").mkdir()
    with pytest.raises(ConfigError, match=r"^training.model_path run/model: another run's .*step_40"):
        check_model_path_is_new(train())
    with pytest.raises(ConfigError, match=r"^training.model_path"):  # another run's model is no resume
        (tmp_path / "elsewhere").mkdir()
        check_model_path_is_new(train(train_from="elsewhere"))
    check_model_path_is_new(train(train_from="run/model/step_20"))
    check_model_path_is_new(train(train_from="run/model"))


@pytest.mark.parametrize("option", ["src", "tgt"])
def test_predict_refuses_a_line_that_is_not_utf8_naming_the_file_and_line(predict_files, option):
    from onmt_entmax.eole.files import check_predict_files

    (predict_files / f"{option}.txt").write_bytes(b"a b\nx\nc \xe9\n")
    with pytest.raises(ConfigError) as err:
        check_predict_files(PredictConfig(model_path="model", src="src.txt", tgt="tgt.txt"))
    assert f"-{option} {option}.txt line 3 " in str(err.value)


@pytest.mark.parametrize("src,says", [(b"a\n\xff b\n", "data.corpus_1.path_src src.txt line 2 "),
                                      (b"", "data.corpus_1.path_src src.txt "), (b" \n\n", "data.corpus_1.path_src ")])
def test_train_refuses_a_corpus_that_is_not_utf8_or_has_no_sentence(tmp_path, monkeypatch, src, says):
    """Both end inside Eole's data reader with a traceback (UnicodeDecodeError; UnboundLocalError)."""
    from onmt_entmax.eole.files import check_train_files

    monkeypatch.chdir(tmp_path)
    (tmp_path / "src.txt").write_bytes(src)
    (tmp_path / "tgt.txt").write_text("a\nb\n")
    config = TrainConfig(src_vocab="v.src", tgt_vocab="v.tgt", model=TINY,
                         data={"corpus_1": {"path_src": "src.txt", "path_tgt": "tgt.txt"}})
    with pytest.raises(ConfigError) as err:
        check_train_files(config)
    assert str(err.value).startswith(says)


# --- the option table, as Eole's configs render it ----------------------------------------------------
def _classes(option):
    """The config classes that must carry ``option`` as a field."""
    from eole.config.models import BaseModelConfig, DecoderConfig
    from eole.config.training import TrainingConfig

    section = {"model": family(BaseModelConfig), "training": family(TrainingConfig), "decoding": [PredictConfig]}
    return section[option.section] + (family(DecoderConfig) if option.on_decoder else [])


def _accepts(option, value) -> bool:
    """Whether Eole's config of ``option``'s section takes ``value`` for it."""
    from eole.config.training import TrainingConfig

    try:
        if option.section == "model":
            config = build_model_config({**TINY, option.name: value})
        elif option.section == "training":
            config = TrainingConfig(**{option.name: value})
        else:
            config = PredictConfig(model_path=["m"], src="s.txt", **{option.name: value})
    except ValidationError:
        return False
    return getattr(config, option.name) == value or isinstance(value, str)  # ("2" read as 2)


@pytest.mark.parametrize("option", of_toolkit(OPTIONS, "eole"), ids=lambda o: o.name)
def test_each_option_of_the_table_is_a_field_with_the_tables_default_help_and_values(option):
    for cls in _classes(option):
        field = cls.model_fields[option.name]
        assert field.default == option.default and field.description == option.help_for("eole"), cls
    for name in option.choice_names() or ():
        assert _accepts(option, name), name
    assert not _accepts(option, "entmax16") or option.type is str and option.choices is None
    for word in option.words:
        assert _accepts(option, word)
    if option.type in (int, float):
        low = option.minimum if option.minimum is not None else 3
        assert _accepts(option, option.type(low)) and not _accepts(option, True)  # a YAML boolean is no number
        assert _accepts(option, str(option.type(low))) is (not option.strict)
        if option.minimum is not None:
            assert not _accepts(option, option.type(option.minimum) - 1)
        if option.type is float:
            assert not _accepts(option, float("inf")) and not _accepts(option, float("nan"))
        else:
            assert not _accepts(option, 2.5)
    if option.type is bool:
        assert _accepts(option, True) and _accepts(option, False)

