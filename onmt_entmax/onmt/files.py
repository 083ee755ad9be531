"""Files checked before a command starts (the checks: ``onmt_entmax.options.files``): ``onmt_translate``'s
by ``ArgumentParser.validate_translate_opts``, its first step, before the model loads and before upstream
opens ``-output``; ``onmt_train``'s ``-save_model`` by ``validate_train_opts``, before a model is built; the
corpus files of ``onmt_train`` and ``onmt_build_vocab`` (and the latter's vocabularies, never a corpus) by
``validate_prepare_opts``, before the data is read; ``onmt_train``'s ``-log_file`` against the files it reads by
``onmt.bin.train.train``, before the log file opens; ``-save_model`` against another run's checkpoints by
``build_model_saver``, before the first step."""
from __future__ import annotations

import os

import yaml

from onmt_entmax.options.files import (
    check_corpus_files,
    check_creatable_folder,
    check_decoding_files,
    check_new_run,
    check_out_dir,
    check_outputs,
    check_training_outputs,
    run_checkpoints,
    same_file,
)


def corpora(opt) -> dict:
    """onmt_train's ``data`` as {corpus name: {key: value}}: the YAML text until upstream's
    ``validate_prepare_opts`` parses it (after ``validate_train_opts``), the parsed dict after."""
    data = getattr(opt, "data", None) or {}
    return (yaml.safe_load(data) or {}) if isinstance(data, str) else data


def check_save_model(opt) -> None:
    """``-save_model``'s folder a folder or creatable (upstream makes it when it builds the model saver,
    and a file in the way ends the run with a traceback)."""
    if getattr(opt, "save_model", None):
        check_creatable_folder("save_model", os.path.dirname(opt.save_model) or ".")


def wrap_validate_prepare_opts(upstream):
    """``ArgumentParser.validate_prepare_opts`` (classmethod; ``onmt_train`` and ``onmt_build_vocab``, before
    the data is read): every corpus file there, named in one line (upstream raises with a traceback)."""

    def validate_prepare_opts(cls, opt, *args, **kwargs):
        check_corpus_files(corpora(opt))
        if kwargs.get("build_vocab_only", args[0] if args else False):
            check_vocab_outputs(opt)
        return upstream(cls, opt, *args, **kwargs)

    return validate_prepare_opts


def check_vocab_outputs(opt) -> None:
    """``onmt_build_vocab``'s vocabularies none of its corpus files (with ``-overwrite`` upstream would replace
    the corpus with the vocabulary; without, it stops after reading the data)."""
    vocabs = {"src_vocab": getattr(opt, "src_vocab", None)}
    if not getattr(opt, "share_vocab", False):
        vocabs["tgt_vocab"] = getattr(opt, "tgt_vocab", None)
    check_training_outputs(vocabs, corpora(opt), {})


def check_train_outputs(opt) -> None:
    """``onmt_train``'s ``-log_file`` none of the files it reads (corpus, vocabularies, ``-train_from``)."""
    inputs = {name: getattr(opt, name, None) for name in ("src_vocab", "tgt_vocab", "train_from")}
    check_training_outputs({"log_file": getattr(opt, "log_file", None)}, corpora(opt), inputs)


def wrap_train(upstream):
    """``onmt.bin.train.train(opt)``, ``onmt_train``'s body: ``check_train_outputs`` first, before upstream opens
    ``-log_file`` (``init_logger``, its first line) and before anything is read."""

    def train(opt, *args, **kwargs):
        check_train_outputs(opt)
        return upstream(opt, *args, **kwargs)

    return train


def check_save_model_is_new(opt) -> None:
    """``-save_model`` holds no other run's checkpoints (``<save_model>_step_N.pt``): this run's would replace them
    one by one, unless ``-train_from`` one of them resumes that run."""
    if getattr(opt, "save_model", None):
        saved = run_checkpoints(opt.save_model)
        check_new_run("-save_model", opt.save_model, saved, getattr(opt, "train_from", None),
                      lambda start: any(same_file(start, path) for path in saved))


def wrap_build_model_saver(upstream):
    """``build_model_saver(model_opt, opt, ...)``: ``check_save_model_is_new`` first; after every option check,
    before the data is read and the first step trained."""

    def build_model_saver(model_opt, opt, *args, **kwargs):
        check_save_model_is_new(opt)
        return upstream(model_opt, opt, *args, **kwargs)

    return build_model_saver


def check_translate_files(opt) -> None:
    """Outputs writable and apart from the inputs; -src and -tgt line for line (OpenNMT-py drops a blank
    source line)."""
    models = getattr(opt, "models", None) or getattr(opt, "model", None)
    check_decoding_files(opt, {"model": models, "src": getattr(opt, "src", None), "tgt": getattr(opt, "tgt", None)})


def wrap_validate_translate_opts(upstream):
    """``ArgumentParser.validate_translate_opts`` (classmethod): stock checks, then the files'."""

    def validate_translate_opts(cls, opt):
        upstream(cls, opt)
        check_translate_files(opt)

    return validate_translate_opts


__all__ = ["check_out_dir", "check_outputs", "check_save_model", "check_save_model_is_new", "check_train_outputs",
           "check_translate_files", "check_vocab_outputs", "corpora", "wrap_build_model_saver", "wrap_train",
           "wrap_validate_prepare_opts", "wrap_validate_translate_opts"]
