"""Files an Eole command reads and writes, checked on the config it builds, before a model loads or a
step trains; each problem is one ``ConfigError`` line naming the option. ``eole predict``: as
``onmt_translate`` (``onmt_entmax.options.files``). ``eole train`` / ``build_vocab``: the corpus files,
``train_from``, a ``model_path`` that can become a folder (Eole writes one there at the first save:
a file in its place would end the run then, after its steps were trained), a ``log_file`` and ``build_vocab``'s
vocabularies that are none of the files read; before the first step, a ``model_path`` without another run's
``step_N/`` (they would be replaced)."""
from __future__ import annotations

import os

from onmt_entmax.errors import ConfigError, EntmaxOptionError
from onmt_entmax.options.files import (
    CORPUS_FILES,
    blocking_file,
    check_corpus_files,
    check_decoding_files,
    check_new_run,
    check_training_outputs,
    numbered,
    writes_into,
)


def check_predict_files(config) -> None:
    """Each output writable and neither an input nor another output, ``-src`` there and not empty,
    ``-tgt`` line for line with it and without a blank line (Eole drops that pair). A blank source line
    passes: Eole keeps it (its output line is the translation of the empty input)."""
    check_model_folders(config.model_path)
    inputs = {"model_path": config.model_path, "src": config.src, "tgt": getattr(config, "tgt", None)}
    try:
        check_decoding_files(config, inputs, toolkit="Eole", drops_blank_sources=False)
    except EntmaxOptionError as err:
        raise ConfigError(str(err)) from None


def check_model_folders(model_path) -> None:
    """Each ``model_path`` an Eole model folder (``config.json`` in it), where it names a local path: an
    absolute or ``./`` path, or one that exists (``org/name`` may be a Hugging Face model, Eole's to fetch)."""
    for path in [model_path] if isinstance(model_path, str) else model_path or []:
        if os.path.isfile(path):
            raise ConfigError(f"-model_path {path} is a file: give the model's folder (config.json, "
                              "model.00.safetensors)")
        if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
            raise ConfigError(f"-model_path {path}: no config.json there, not an Eole model folder")
        local = os.path.isabs(path) or path.startswith(("./", "../", "~")) or path.count("/") != 1
        if not os.path.exists(path) and local:
            raise ConfigError(f"-model_path {path}: no such model folder")


def step_folders(model_path: str) -> list[str]:
    """The checkpoints ``<model_path>/step_<N>/`` Eole saved there, by step."""
    return numbered(os.path.join(model_path, "step_"), folders=True)


def check_model_path_is_new(config) -> None:
    """``training.model_path`` holds no other run's ``step_N/`` folders (this run's would replace them), unless
    ``training.train_from`` resumes that run (names its folder or one of its step folders)."""
    training = config.training
    if not training.model_path:
        return
    try:
        check_new_run("training.model_path", training.model_path, step_folders(training.model_path),
                      training.train_from, lambda start: writes_into(start, training.model_path),
                      "training.train_from")
    except EntmaxOptionError as err:
        raise ConfigError(str(err)) from None


def wrap_build_model_saver(upstream):
    """``build_model_saver(config, ...)``: ``check_model_path_is_new`` first; after every config check, before the
    data is read and the first step trained."""

    def build_model_saver(config, *args, **kwargs):
        check_model_path_is_new(config)
        return upstream(config, *args, **kwargs)

    return build_model_saver


def check_train_files(config) -> None:
    """Every local corpus file there (``hf://`` and other URLs are Eole's to fetch), ``train_from`` there,
    ``model_path`` a folder or nothing yet."""
    data = getattr(config, "data", None) or {}
    corpora = {name: {key: getattr(c, key, None) for key in CORPUS_FILES} for name, c in data.items()}
    training = getattr(config, "training", None)
    try:
        check_corpus_files(corpora)
        if training is None:  # build_vocab: its vocabularies never a corpus (overwrite would replace it)
            vocabs = {"src_vocab": config.src_vocab, "tgt_vocab": None if config.share_vocab else config.tgt_vocab}
            check_training_outputs(vocabs, corpora, {})
            return
        inputs = {"src_vocab": config.src_vocab, "tgt_vocab": config.tgt_vocab, "train_from": training.train_from}
        check_training_outputs({"log_file": getattr(config, "log_file", None)}, corpora, inputs)
    except EntmaxOptionError as err:
        raise ConfigError(str(err)) from None
    path = getattr(training, "model_path", None)
    blocking = blocking_file(path) if path else None
    if blocking is not None and blocking == os.path.abspath(path):
        raise ConfigError(f"training.model_path {path} is a file: Eole saves the model as a folder there; "
                          "give another path")
    if blocking is not None:
        raise ConfigError(f"training.model_path {path}: {blocking} is a file, not a folder")
    start = getattr(training, "train_from", None)
    if start and not os.path.exists(start):
        raise ConfigError(f"training.train_from {start}: no such model folder")
