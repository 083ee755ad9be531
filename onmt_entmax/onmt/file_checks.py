"""``onmt_translate``'s files checked by ``ArgumentParser.validate_translate_opts``, its first step,
before the model loads and before upstream opens ``-output`` (the checks: ``onmt_entmax.options.files``)."""
from __future__ import annotations

from onmt_entmax.options.files import (PNG_OUTPUTS, TRANSLATE_OUTPUTS, check_out_dir, check_outputs,
                                       check_translate_inputs)


def check_translate_files(opt) -> None:
    """Outputs writable and apart from the inputs; -src and -tgt line for line (OpenNMT-py drops a blank
    source line)."""
    models = getattr(opt, "models", None) or getattr(opt, "model", None)
    inputs = {"model": models, "src": getattr(opt, "src", None), "tgt": getattr(opt, "tgt", None)}
    outputs = {name: getattr(opt, name, None) for name in TRANSLATE_OUTPUTS}
    check_outputs(outputs, inputs, {name: ".png" for name in PNG_OUTPUTS})
    check_translate_inputs(inputs["src"], inputs["tgt"])


def wrap_validate_translate_opts(upstream):
    """``ArgumentParser.validate_translate_opts`` (classmethod): stock checks, then the files'."""

    def validate_translate_opts(cls, opt):
        upstream(cls, opt)
        check_translate_files(opt)

    return validate_translate_opts


__all__ = ["check_out_dir", "check_outputs", "check_translate_files", "wrap_validate_translate_opts"]
