"""onmt_translate's files, checked before the model loads: no output writes over an input or fails
after decoding, no source line is dropped without a word, -tgt goes line for line with -src."""
import pytest

pytest.importorskip("onmt")

from onmt_entmax.errors import EntmaxOptionError  # noqa: E402
from onmt_entmax.onmt.files import check_out_dir  # noqa: E402


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.pt").write_bytes(b"weights")
    (tmp_path / "src.txt").write_text("a b\nc\n")
    (tmp_path / "tgt.txt").write_text("b a\nc\n")
    (tmp_path / "out").mkdir()
    return tmp_path


def _validate(*args):
    """onmt_translate's first step: parse, then ArgumentParser.validate_translate_opts."""
    from onmt.bin.translate import _get_parser
    from onmt.utils.parse import ArgumentParser

    opt = _get_parser().parse_args(["-model", "model.pt", "-src", "src.txt", *args])
    ArgumentParser.validate_translate_opts(opt)
    return opt


REFUSED = [
    (["-entmax_report", "model.pt"], r"-entmax_report model.pt is the -model file: it would be written over"),
    (["-entmax_report", "src.txt"], r"-entmax_report src.txt is the -src file"),
    (["-tgt", "tgt.txt", "-attn_heatmap", "./tgt.txt"], r"-attn_heatmap ./tgt.txt is the -tgt file"),
    (["-output", "src.txt"], r"-output src.txt is the -src file"),
    (["-entmax_report", "pred.txt"], r"-entmax_report pred.txt is also -output"),  # -output's default
    (["-entmax_report", "missing/rep.jsonl"], r"-entmax_report missing/rep.jsonl: the folder .*missing does not exist"),
    (["-entmax_report", "out"], r"-entmax_report out is a folder; give a file name"),
    (["-attn_heatmap", "heat.txt"], r"-attn_heatmap writes a PNG image: give a file name ending in .png, got heat.txt"),
    (["-attn_heatmap", "out"], r"-attn_heatmap out is a folder"),
    (["-log_file", "tgt.txt", "-tgt", "tgt.txt"], r"-log_file tgt.txt is the -tgt file"),
]


@pytest.mark.parametrize("args,message", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_an_output_that_cannot_be_written_or_is_an_input_is_refused(files, args, message):
    before = {p.name: p.read_bytes() for p in files.iterdir() if p.is_file()}
    with pytest.raises(EntmaxOptionError, match=message):
        _validate(*args)
    assert {p.name: p.read_bytes() for p in files.iterdir() if p.is_file()} == before


def test_good_outputs_pass(files):
    _validate("-tgt", "tgt.txt", "-output", "out/pred.txt", "-entmax_report", "out/rep.jsonl",
              "-attn_heatmap", "out/heat.PNG")


def test_blank_source_lines_are_refused_naming_them(files):
    (files / "src.txt").write_text("a b\n\nc\n   \nd\n")
    with pytest.raises(EntmaxOptionError, match=r"-src src.txt has blank lines \(2, 4\): OpenNMT-py skips them"):
        _validate()


def test_an_empty_source_is_refused_rather_than_crashing_inside_opennmt(files):
    (files / "src.txt").write_text("")
    with pytest.raises(EntmaxOptionError, match=r"^-src src.txt is empty: nothing to translate$"):
        _validate()


@pytest.mark.parametrize("tgt,message", [
    ("b a\n", r"-tgt tgt.txt has 1 lines but -src src.txt has 2"),
    ("b a\nc\nd\n", r"-tgt tgt.txt has 3 lines but -src src.txt has 2"),
    ("b a\n\n", r"-tgt tgt.txt has blank lines \(2\)"),
])
def test_a_reference_file_must_go_line_for_line_with_the_source(files, tgt, message):
    (files / "tgt.txt").write_text(tgt)
    with pytest.raises(EntmaxOptionError, match=message):
        _validate("-tgt", "tgt.txt")


def test_forced_support_without_a_reference_is_refused():
    import argparse

    from onmt_entmax.options.decoding import DecodingConfig
    from onmt_entmax.registry import get_transformation

    opt = argparse.Namespace(forced_support=True, tgt=None)
    with pytest.raises(EntmaxOptionError, match="-forced_support decodes the reference: give it with -tgt"):
        DecodingConfig.from_opts(opt, [get_transformation("entmax15")])
    assert DecodingConfig.from_opts(argparse.Namespace(forced_support=True, tgt="t.txt"),
                                    [get_transformation("entmax15")]).forced_support


def test_an_analysis_out_dir_must_be_a_folder_and_never_hold_an_input(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(EntmaxOptionError, match="is a file, not a folder"):
        check_out_dir("out_dir", str(tmp_path / "file"), ["a.png"], {})
    with pytest.raises(EntmaxOptionError, match="writing head_diversity.json there would overwrite the -src file"):
        check_out_dir("out_dir", str(tmp_path), ["head_diversity.json"],
                      {"src": str(tmp_path / "head_diversity.json")})
    check_out_dir("out_dir", str(tmp_path / "new"), ["a.png"], {"src": str(tmp_path / "file")})


def test_training_refuses_a_missing_corpus_file_and_a_save_model_under_a_file(tmp_path):
    """Before the data is read or a model built: one line naming the corpus key or -save_model."""
    from onmt.bin.train import _get_parser
    from onmt.utils.parse import ArgumentParser

    (tmp_path / "src.txt").write_text("a\n")
    (tmp_path / "a_file").write_text("x\n")
    data = f"{{'corpus_1': {{'path_src': '{tmp_path / 'src.txt'}', 'path_tgt': '{tmp_path / 'tgt.txt'}'}}}}"

    def opt(save_model):
        return _get_parser().parse_known_args(["-data", data, "-src_vocab", "v", "-save_model", save_model])[0]

    with pytest.raises(EntmaxOptionError, match=r"^data.corpus_1.path_tgt \S*tgt.txt: no such file$"):
        ArgumentParser.validate_prepare_opts(opt(str(tmp_path / "run/model")))
    with pytest.raises(EntmaxOptionError, match=r"^-save_model \S*a_file: \S*a_file is a file, not a folder$"):
        ArgumentParser.validate_train_opts(opt(str(tmp_path / "a_file/model")))
    ArgumentParser.validate_train_opts(opt(str(tmp_path / "new/folder/model")))  # (made when it saves)


@pytest.mark.parametrize("option", ["src", "tgt"])
def test_a_source_or_reference_line_that_is_not_utf8_is_refused_naming_the_file_and_line(files, option):
    (files / f"{option}.txt").write_bytes(b"a b\nc \xe9 d\n")  # (Latin-1 e-acute on line 2)
    with pytest.raises(EntmaxOptionError) as err:
        _validate("-tgt", "tgt.txt")
    assert f"-{option} {option}.txt line 2 " in str(err.value)


def _train_opt(tmp_path, **corpus):
    from onmt.bin.train import _get_parser

    data = {"corpus_1": {"path_src": str(tmp_path / "src.txt"), "path_tgt": str(tmp_path / "tgt.txt"), **corpus}}
    return _get_parser().parse_known_args(["-data", str(data), "-src_vocab", "v", "-save_model", "m"])[0]


@pytest.mark.parametrize("key,text", [("path_src", b"a\nb\nc \xff\n"), ("path_tgt", b"a\nb\n\x80c\n")])
def test_a_training_corpus_line_that_is_not_utf8_is_refused_naming_the_file_and_line(tmp_path, key, text):
    from onmt.utils.parse import ArgumentParser

    (tmp_path / "src.txt").write_text("a\nb\nc\n")
    (tmp_path / "tgt.txt").write_text("a\nb\nc\n")
    (tmp_path / f"{key[5:]}.txt").write_bytes(text)
    with pytest.raises(EntmaxOptionError) as err:
        ArgumentParser.validate_prepare_opts(_train_opt(tmp_path))
    assert str(err.value).startswith(f"data.corpus_1.{key} {tmp_path / (key[5:] + '.txt')} line 3 ")


def test_the_line_of_a_byte_that_is_not_utf8_is_counted_across_read_blocks(tmp_path):
    from onmt_entmax.options.files import corpus_lines

    path = tmp_path / "big.txt"
    path.write_bytes("é a\n".encode() * 500 + b"\xe9\n" + b"b\n" * 10)
    for block in (1, 3, 7, 1 << 20):
        with pytest.raises(EntmaxOptionError, match=" line 501 "):
            corpus_lines("big", str(path), block)
    path.write_bytes("é a\n".encode() * 500 + b"b")
    assert corpus_lines("big", str(path), 7) == (501, True)


@pytest.mark.parametrize("src", ["", "\n  \n"])
def test_an_empty_training_corpus_is_refused_naming_it(tmp_path, src):
    """Upstream's data mixer ends in an UnboundLocalError traceback on a corpus without a sentence."""
    from onmt.utils.parse import ArgumentParser

    (tmp_path / "src.txt").write_text(src)
    (tmp_path / "tgt.txt").write_text(src)
    with pytest.raises(EntmaxOptionError) as err:
        ArgumentParser.validate_prepare_opts(_train_opt(tmp_path))
    assert str(err.value).startswith(f"data.corpus_1.path_src {tmp_path / 'src.txt'} ")


def _corpus(tmp_path):
    for name in ("src.txt", "tgt.txt"):
        (tmp_path / name).write_text("a b c\nb c\n")
    return {"corpus_1": {"path_src": str(tmp_path / "src.txt"), "path_tgt": str(tmp_path / "tgt.txt")}}


def test_build_vocab_never_replaces_a_corpus_with_its_vocabulary(tmp_path):
    """``-src_vocab`` naming the training corpus (any spelling) is refused before the data is read, even with
    ``-overwrite``: the corpus keeps its bytes."""
    from onmt.bin.build_vocab import _get_parser, build_vocab_main

    data = _corpus(tmp_path)
    (tmp_path / "link.txt").symlink_to(tmp_path / "tgt.txt")
    before = {name: (tmp_path / name).read_bytes() for name in ("src.txt", "tgt.txt")}
    for vocab in (["-src_vocab", str(tmp_path / "src.txt")],
                  ["-src_vocab", str(tmp_path / "v"), "-tgt_vocab", str(tmp_path / "link.txt")]):
        opt = _get_parser().parse_known_args(["-data", str(data), *vocab, "-save_data", str(tmp_path / "s"),
                                              "-n_sample", "-1", "-overwrite"])[0]
        with pytest.raises(EntmaxOptionError, match="_vocab .* is the data.corpus_1.path_(src|tgt) file"):
            build_vocab_main(opt)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    opt = _get_parser().parse_known_args(["-data", str(data), "-src_vocab", str(tmp_path / "v"), "-share_vocab",
                                          "-tgt_vocab", str(tmp_path / "src.txt"), "-save_data", str(tmp_path / "s"),
                                          "-n_sample", "-1"])[0]
    from onmt_entmax.onmt.files import check_vocab_outputs
    check_vocab_outputs(opt)  # (with -share_vocab, -tgt_vocab is not written)


def test_onmt_train_log_file_is_never_a_file_it_reads(tmp_path):
    """``-log_file`` naming the corpus or the vocabulary ends the run before the log file opens: nothing is
    appended to the corpus."""
    from onmt.bin.train import _get_parser, train

    data = _corpus(tmp_path)
    (tmp_path / "vocab").write_text("a\t3\n")
    before = (tmp_path / "src.txt").read_bytes()
    for log in (tmp_path / "src.txt", tmp_path / "vocab"):
        opt = _get_parser().parse_known_args(["-data", str(data), "-src_vocab", str(tmp_path / "vocab"),
                                              "-save_model", str(tmp_path / "run/m"), "-log_file", str(log)])[0]
        with pytest.raises(EntmaxOptionError, match="^-log_file .* is the (data.corpus_1.path_src|-src_vocab) file"):
            train(opt)
    assert (tmp_path / "src.txt").read_bytes() == before


def test_a_second_run_on_one_save_model_is_refused_unless_it_resumes_the_first(tmp_path):
    """Checkpoints ``<save_model>_step_N.pt`` already there belong to another run: a new run would replace them
    one by one, so it is refused before its first step; ``-train_from`` one of them resumes and passes."""
    from onmt.bin.train import _get_parser

    from onmt_entmax.onmt.files import check_save_model_is_new

    data = _corpus(tmp_path)
    (tmp_path / "run").mkdir()
    for step in (5, 10):
        (tmp_path / "run" / f"m_step_{step}.pt").write_bytes(b"weights")
    (tmp_path / "run" / "m_step_x.pt").write_bytes(b"not a checkpoint of the run")

    def opt(save_model, *more):
        return _get_parser().parse_known_args(["-data", str(data), "-src_vocab", "v",
                                               "-save_model", str(save_model), *more])[0]

    with pytest.raises(EntmaxOptionError, match=r"^-save_model \S+/run/m: another run's .*\(2, the newest "
                                                r"\S+m_step_10.pt\)"):
        check_save_model_is_new(opt(tmp_path / "run" / "m"))
    with pytest.raises(EntmaxOptionError, match="-save_model"):  # another run's checkpoint is no resume
        check_save_model_is_new(opt(tmp_path / "run" / "m", "-train_from", str(tmp_path / "run" / "m_step_x.pt")))
    check_save_model_is_new(opt(tmp_path / "run" / "m", "-train_from", str(tmp_path / "run" / "m_step_5.pt")))
    check_save_model_is_new(opt(tmp_path / "run" / "other"))


def test_onmt_train_into_a_finished_runs_save_model_stops_before_its_first_step(tmp_path):
    """The same config trained twice: the second ``onmt_train`` ends in the refusal, the first run's checkpoint
    keeps its bytes; ``-train_from`` it resumes."""
    from onmt_testkit import build_vocab, reversal_corpus, train, yaml_config

    reversal_corpus(tmp_path, n_train=40, n_test=4)
    config = yaml_config(tmp_path, {"encoder_type": "rnn", "decoder_type": "rnn", "layers": 1, "hidden_size": 8,
                                    "word_vec_size": 8}, steps=2)
    build_vocab(config)
    train(config)
    ckpt = tmp_path / "run" / "model_step_2.pt"
    before = ckpt.read_bytes()
    with pytest.raises(EntmaxOptionError, match="^-save_model .*another run's checkpoints"):
        train(config)
    assert ckpt.read_bytes() == before
    train(config, "-train_from", str(ckpt), "-train_steps", "3", "-save_checkpoint_steps", "3")
    assert (tmp_path / "run" / "model_step_3.pt").exists()


def test_a_source_line_longer_than_the_position_encoding_is_refused_before_decoding(tmp_path):
    """OpenNMT-py's sinusoidal table has 5000 rows: a longer line (or -max_length) ended onmt_translate in
    SequenceTooLongError at its batch, after the batches before it were decoded."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
    from onmt_testkit import translate
    from tiny_transformers import trained

    model = trained()["dense"]  # a Transformer with position_encoding
    (tmp_path / "src.txt").write_text("w1 w2\n" + " ".join(["w1"] * 5001) + "\n")
    with pytest.raises(EntmaxOptionError, match=r"^-src \S*src.txt line 2 has 5001 tokens .* 5000 positions"):
        translate(model, tmp_path / "src.txt", tmp_path / "pred.txt")
    (tmp_path / "src.txt").write_text("w1 w2\n")
    with pytest.raises(EntmaxOptionError, match=r"^-max_length 6000: .* 5000 positions"):
        translate(model, tmp_path / "src.txt", tmp_path / "pred.txt", "-max_length", "6000")
    assert not (tmp_path / "pred.txt").exists() or (tmp_path / "pred.txt").read_text() == ""
