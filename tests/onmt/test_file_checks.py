"""onmt_translate's files, checked before the model loads: no output writes over an input or fails
after decoding, no source line is dropped without a word, -tgt goes line for line with -src."""
import pytest

pytest.importorskip("onmt")

from onmt_entmax.onmt.file_checks import check_out_dir  # noqa: E402
from onmt_entmax.onmt.validation import EntmaxOptionError  # noqa: E402


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

    from onmt_entmax.onmt.decoding.options import DecodingConfig
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
