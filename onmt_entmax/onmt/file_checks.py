"""Files checked before a command starts (the checks: ``onmt_entmax.options.files``): ``onmt_translate``'s
by ``ArgumentParser.validate_translate_opts``, its first step, before the model loads and before upstream
opens ``-output``; ``onmt_train``'s ``-save_model`` by ``validate_train_opts``, before a model is built; the
corpus files of ``onmt_train`` and ``onmt_build_vocab`` by ``validate_prepare_opts``, before the data is read."""
from __future__ import annotations

import os

import yaml

from onmt_entmax.options.files import (check_corpus_files, check_creatable_folder, check_decoding_files,
                                       check_out_dir, check_outputs)


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
        return upstream(cls, opt, *args, **kwargs)

    return validate_prepare_opts


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


__all__ = ["check_out_dir", "check_outputs", "check_save_model", "check_translate_files", "corpora",
           "wrap_validate_prepare_opts", "wrap_validate_translate_opts"]
