"""Files of a command checked before it starts: nothing written over, no line silently dropped.

For ``onmt_translate`` and ``eole predict`` (each adapter calls these on its parsed options, before the
model loads and before the toolkit opens its output):
- every output (``-output``, ``-entmax_report``, ``-attn_heatmap``, ``-log_file``, ``-dump_beam``) must
  be writable where it is (its folder exists, it is not a folder; a heatmap ends in ``.png``) and
  must be neither an input (the model, ``-src``, ``-tgt``) nor another output;
- ``-src`` must exist and hold a line; where the toolkit drops an example whose source is blank
  (OpenNMT-py), it must have no blank line, or every later output line and report id would move up one;
- ``-tgt`` must have as many lines as ``-src`` (OpenNMT-py stops at the shorter file, exit status 0),
  none of them blank (both toolkits drop that pair);
- both UTF-8, a line that is not named with its number (both toolkits decode every line as UTF-8);
- once the model is loaded, every ``-src`` line and ``-max_length`` within the positions of its
  sinusoidal position table (``check_positions``).
For training (``onmt_train``, ``onmt_build_vocab``, ``eole train``): every corpus file there, UTF-8 and,
for its text (source, target), with a sentence (``check_corpus_files``), and the model's folder a folder
or creatable (``check_creatable_folder``).
Each problem is an ``EntmaxOptionError`` naming the option. The same checks serve other commands'
outputs (``check_outputs``, ``check_out_dir``).
"""
from __future__ import annotations

import glob
import os
from typing import Callable, Iterable, Mapping, Optional, Sequence

from onmt_entmax.errors import EntmaxOptionError

STDIN = "-"
TRANSLATE_OUTPUTS = ("output", "entmax_report", "attn_heatmap", "log_file", "dump_beam")
PNG_OUTPUTS = ("attn_heatmap",)


def _paths(value) -> list[str]:
    if value is None or value == "" or value == STDIN:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def same_file(a: str, b: str) -> bool:
    """True when the two paths name one file (existing or not)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def writes_into(output: str, given: str) -> bool:
    """True when writing the file ``output`` would change the input ``given``: the same file (through a
    symbolic or hard link, existing or not), or a file anywhere inside ``given`` when it is a folder (an Eole
    model folder holds links into its ``step_N/`` folders: ``M/model.00.safetensors`` is a weights file)."""
    return same_file(output, given) or inside_folder(output, given)


def inside_folder(output: str, given: str) -> bool:
    """True when ``given`` is a folder (through links) and ``output`` lies anywhere inside it."""
    folder = os.path.realpath(given)
    return os.path.isdir(folder) and os.path.commonpath([os.path.realpath(output), folder]) == folder


def check_writable(option: str, path: str, suffix: Optional[str] = None) -> None:
    """``path`` can be written as a file: its folder exists and is writable, it is not a folder,
    and it ends in ``suffix`` when one is required (a PNG writer picks its format by the name)."""
    if os.path.isdir(path):
        raise EntmaxOptionError(f"-{option} {path} is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise EntmaxOptionError(f"-{option} {path}: the folder {folder} does not exist (create it first)")
    if not os.access(path, os.W_OK) if os.path.exists(path) else not os.access(folder, os.W_OK):
        raise EntmaxOptionError(f"-{option} {path}: not writable")
    if suffix and not path.lower().endswith(suffix):
        raise EntmaxOptionError(f"-{option} writes a {suffix[1:].upper()} image: give a file name ending in "
                                f"{suffix}, got {path}")


def _check_apart(option: str, path: str, inputs: Mapping[str, object]) -> None:
    """The output ``path`` of ``-option`` neither an input file nor inside an input folder."""
    for other, values in inputs.items():
        for given in _paths(values):
            name = other if "." in other else f"-{other}"  # (a corpus key, data.<corpus>.path_src, has no dash)
            if same_file(path, given):
                raise EntmaxOptionError(f"-{option} {path} is the {name} file: it would be written over; "
                                        f"choose another -{option}")
            if inside_folder(path, given):
                raise EntmaxOptionError(f"-{option} {path} is inside the {name} folder {given}: it would write "
                                        f"into the model's files; choose a -{option} outside it")


def check_outputs(outputs: Mapping[str, object], inputs: Mapping[str, object],
                  suffixes: Optional[Mapping[str, str]] = None) -> None:
    """Each output path writable and distinct from every input and every other output.
    ``outputs`` / ``inputs``: option name (without dash) -> a path, a list of paths or None."""
    suffixes = suffixes or {}
    seen: list[tuple[str, str]] = []
    for option, value in outputs.items():
        for path in _paths(value):
            _check_apart(option, path, inputs)
            for other, given in seen:
                if same_file(path, given):
                    raise EntmaxOptionError(f"-{option} {path} is also -{other}: one would overwrite the other")
            check_writable(option, path, suffixes.get(option))
            seen.append((option, path))


def not_utf8(label: str, line: bytes, number: int) -> Optional[EntmaxOptionError]:
    """The refusal for ``line`` (1-based ``number`` in the file ``label`` names) when it is not UTF-8: both
    toolkits decode every line as UTF-8 and would end with a traceback in their data reader there."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as err:
        return EntmaxOptionError(f"{label} line {number} is not UTF-8 text (byte 0x{line[err.start]:02x} at "
                                 f"byte {err.start + 1} of the line): convert the file to UTF-8 (iconv -t UTF-8)")
    return None


def blank_lines(path: str, option: str = "") -> tuple[int, list[int]]:
    """(number of lines, 1-based numbers of the blank ones) of a text file, read as OpenNMT-py
    reads it (split on newlines; a line of spaces is blank: upstream strips it to nothing). A line
    that is not UTF-8 is refused, naming ``-option`` (when given), the file and the line."""
    count, blank = 0, []
    with open(path, "rb") as f:
        for count, line in enumerate(f, 1):
            refusal = not_utf8(f"-{option} {path}" if option else path, line, count)
            if refusal is not None:
                raise refusal
            if not line.strip():
                blank.append(count)
    return count, blank


def corpus_lines(label: str, path: str, block: int = 1 << 20) -> tuple[int, bool]:
    """(number of lines, whether one holds more than spaces) of a training corpus file, read in blocks that
    end at a line's end (a UTF-8 character never spans one); a block that is not UTF-8 is refused naming
    ``label``, the file and the line (``not_utf8``)."""
    lines, text = 0, False
    with open(path, "rb") as f:
        while chunk := f.read(block) + f.readline():
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as err:
                start = chunk.rfind(b"\n", 0, err.start) + 1
                end = chunk.find(b"\n", err.start)
                raise not_utf8(label, chunk[start:end if end >= 0 else None],
                               lines + chunk.count(b"\n", 0, err.start) + 1) from None
            lines += chunk.count(b"\n") + (not chunk.endswith(b"\n"))
            text = text or bool(chunk.strip())
    return lines, text


def _lines_listed(numbers: Sequence[int]) -> str:
    shown = ", ".join(map(str, numbers[:5]))
    return shown + (f" and {len(numbers) - 5} more" if len(numbers) > 5 else "")


def check_translate_inputs(src: Optional[str], tgt: Optional[str], toolkit: str = "OpenNMT-py",
                           drops_blank_sources: bool = True) -> None:
    """-src exists, is not empty and (where ``toolkit`` drops blank sources) has no blank line; -tgt, when
    given, has one non-blank line per -src line."""
    if not src or src == STDIN:
        return
    if not os.path.isfile(src):
        raise EntmaxOptionError(f"-src {src}: no such file")
    n_src, blank = blank_lines(src, "src")
    if not n_src:  # (upstream's loop over no batch then fails on a name it never bound)
        raise EntmaxOptionError(f"-src {src} is empty: nothing to translate")
    if blank and drops_blank_sources:
        raise EntmaxOptionError(
            f"-src {src} has blank lines ({_lines_listed(blank)}): {toolkit} skips them, so every later output "
            f"line (and -entmax_report id) would belong to another source line; remove them or give them a token")
    if not tgt:
        return
    if not os.path.isfile(tgt):
        raise EntmaxOptionError(f"-tgt {tgt}: no such file")
    n_tgt, blank = blank_lines(tgt, "tgt")
    if n_tgt != n_src:
        raise EntmaxOptionError(f"-tgt {tgt} has {n_tgt} lines but -src {src} has {n_src}: every source line needs "
                                "its reference")
    if blank:
        raise EntmaxOptionError(f"-tgt {tgt} has blank lines ({_lines_listed(blank)}): {toolkit} skips those "
                                "sentence pairs; give every reference a token")


def check_positions(src: Optional[str], max_length: Optional[int], positions: Optional[int],
                    toolkit: str = "OpenNMT-py") -> None:
    """Every -src line (its whitespace tokens) and ``-max_length`` within the ``positions`` a model's
    sinusoidal position encoding has (None: no such table, no limit). The toolkit builds that table with a
    fixed number of rows and no option to change it; a longer source line would end the decoding with a
    traceback at its batch (after every earlier batch was decoded)."""
    if positions is None:
        return
    why = (f"this Transformer's position encoding covers {positions} positions ({toolkit} builds it with that "
           "many, no option changes it)")
    if max_length is not None and max_length > positions:
        raise EntmaxOptionError(f"-max_length {max_length}: {why}; give -max_length {positions} or less")
    if not src or src == STDIN or not os.path.isfile(src):
        return
    with open(src, "rb") as f:
        for number, line in enumerate(f, 1):
            tokens = len(line.split())
            if tokens > positions:
                raise EntmaxOptionError(f"-src {src} line {number} has {tokens} tokens but {why}: split that line "
                                        "(or drop it)")


def check_decoding_files(opt, inputs: Mapping[str, object], toolkit: str = "OpenNMT-py",
                         drops_blank_sources: bool = True) -> None:
    """A decoding command's files: its outputs (``TRANSLATE_OUTPUTS`` read from ``opt``; a heatmap a
    ``.png``) writable and apart from ``inputs`` (option -> path(s); ``src`` and ``tgt`` among them), then
    ``check_translate_inputs`` on ``src`` and ``tgt``."""
    outputs = {name: getattr(opt, name, None) for name in TRANSLATE_OUTPUTS}
    check_outputs(outputs, inputs, {name: ".png" for name in PNG_OUTPUTS})
    check_translate_inputs(inputs.get("src"), inputs.get("tgt"), toolkit, drops_blank_sources)


CORPUS_FILES = ("path_src", "path_tgt", "path_txt", "path_sco", "path_align")
TEXT_CORPUS_FILES = ("path_src", "path_tgt", "path_txt")


def check_corpus_files(data: Mapping[str, Mapping[str, object]]) -> None:
    """Every local file a training corpus names is there (``hf://`` and other URLs are the toolkit's to
    fetch); ``data``: corpus name -> {key: path}, the ``data:`` section of either toolkit's config."""
    for name, corpus in data.items():
        for key in CORPUS_FILES:
            path = corpus.get(key)
            if not path or "://" in str(path):
                continue
            if not os.path.isfile(str(path)):
                raise EntmaxOptionError(f"data.{name}.{key} {path}: no such file")
            _, text = corpus_lines(f"data.{name}.{key} {path}", str(path))
            if not text and key in TEXT_CORPUS_FILES:  # (upstream's data mixer ends in a traceback)
                raise EntmaxOptionError(f"data.{name}.{key} {path} has no text: nothing to train on; give it "
                                        f"sentences or remove the corpus {name}")


def corpus_paths(data: Mapping[str, Mapping[str, object]]) -> dict[str, str]:
    """``data.<corpus>.<key>`` -> path of every local file the corpora of ``data`` read."""
    return {f"data.{name}.{key}": str(corpus[key]) for name, corpus in data.items() for key in CORPUS_FILES
            if corpus.get(key) and "://" not in str(corpus[key])}


def check_training_outputs(outputs: Mapping[str, object], data: Mapping[str, Mapping[str, object]],
                           inputs: Mapping[str, object]) -> None:
    """What a training or vocabulary command writes (its log file; ``build_vocab``'s vocabularies) is none of
    the files it reads: no corpus file of ``data`` (the toolkits' ``overwrite`` would replace a corpus with a
    vocabulary) and none of ``inputs`` (vocabularies, ``train_from``), nor a file inside one of those folders."""
    everything = {**corpus_paths(data), **inputs}
    for option, value in outputs.items():
        for path in _paths(value):
            _check_apart(option, path, everything)


def numbered(prefix: str, suffix: str = "", folders: bool = False) -> list[str]:
    """The paths ``<prefix><N><suffix>`` there (N a step number; only folders when ``folders``), by N."""
    found = glob.glob(glob.escape(prefix) + "*" + glob.escape(suffix))
    steps = {path: path[len(prefix):len(path) - len(suffix)] for path in found if not folders or os.path.isdir(path)}
    return sorted((path for path, step in steps.items() if step.isdigit()), key=lambda path: int(steps[path]))


def run_checkpoints(save_model: str) -> list[str]:
    """The checkpoints ``<save_model>_step_<N>.pt`` OpenNMT-py saved under the prefix ``save_model``, by step."""
    return numbered(save_model + "_step_", ".pt")


def check_new_run(option: str, save: str, checkpoints: Sequence[str], train_from: Optional[str],
                  resumes: Callable[[str], bool], resume_option: str = "-train_from") -> None:
    """A training run saves where no other run's checkpoints are (it would replace them one by one, the
    newest last): ``checkpoints`` saved at ``save`` before must be empty, unless ``train_from`` continues that
    run (``resumes(train_from)``). ``option`` and ``resume_option`` as the user wrote them (``-save_model``)."""
    if not checkpoints or (train_from and resumes(train_from)):
        return
    newest = checkpoints[-1]
    raise EntmaxOptionError(f"{option} {save}: another run's checkpoints are there ({len(checkpoints)}, the newest "
                            f"{newest}) and this run would replace them; give another {option}, remove them, or "
                            f"resume with {resume_option} {newest}")


def blocking_file(path: str | os.PathLike) -> str | None:
    """The file that keeps ``path`` from being a folder: the nearest part of it that exists (``path``
    itself or a folder above it) when that part is not a folder; None when ``path`` is or can be one."""
    part = os.path.abspath(path)
    while not os.path.exists(part):
        part = os.path.dirname(part)
    return None if os.path.isdir(part) else part


def check_creatable_folder(option: str, path: str) -> None:
    """``path`` is a folder or can be made one (a file in the way would end the command when it first
    saves, after its steps were trained)."""
    part = blocking_file(path)
    if part is not None:
        raise EntmaxOptionError(f"-{option} {path}: {part} is a file, not a folder")


def check_out_dir(option: str, path: str, names: Iterable[str], inputs: Mapping[str, object]) -> None:
    """An output folder for files ``names``: creatable or a folder, and none of its files an input."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise EntmaxOptionError(f"-{option} {path} is a file, not a folder")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(path) and not os.path.isdir(parent):
        raise EntmaxOptionError(f"-{option} {path}: its parent folder {parent} does not exist")
    for name in names:
        target = os.path.join(path, name)
        for other, values in inputs.items():
            for given in _paths(values):
                if writes_into(target, given):
                    what = "write into the -{} folder" if os.path.isdir(given) else "overwrite the -{} file"
                    raise EntmaxOptionError(f"-{option} {path}: writing {name} there would {what.format(other)} "
                                            f"{given}")


__all__ = ["CORPUS_FILES", "TRANSLATE_OUTPUTS", "PNG_OUTPUTS", "blocking_file", "check_corpus_files",
           "check_creatable_folder", "check_decoding_files", "check_new_run", "check_outputs", "check_out_dir",
           "check_positions", "check_training_outputs", "corpus_paths", "numbered", "run_checkpoints",
           "check_translate_inputs", "check_writable", "same_file", "writes_into"]
