"""No docstring or comment in onmt_entmax/ names a GPU model: a number measured on a GPU goes stale at
the next kernel change, so it lives in docs/ with its GPU and date, and the code keeps the reason."""
import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "onmt_entmax"
GPU = re.compile(r"\b(?:[HB][12]\d0|H800|A10G?|A30|A40|A100|A800|V100|P100|K80|T4|L4|L40S?|GH200|GB200|RTX ?\d{4}"
                 r"|Tesla|GeForce|Quadro)\b")


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment of a module."""
    source = path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                out.append((node.body[0].lineno, doc))
    out += [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT]
    return out


def test_no_docstring_or_comment_names_a_gpu_model():
    named = [f"{path.relative_to(PACKAGE.parent)}:{line}: {m.group(0)}"
             for path in sorted(PACKAGE.rglob("*.py")) for line, text in _prose(path)
             for m in [GPU.search(text)] if m]
    assert not named, "measurements with a GPU's name belong in docs/ (with the date):\n" + "\n".join(named)


def test_the_check_sees_a_gpu_named_in_a_docstring_and_in_a_comment(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Fast: 0.1 ms on an H200."""\n\n\ndef f():\n    return 1  # 2x on the A100\n')
    assert [GPU.search(text).group(0) for _, text in _prose(module) if GPU.search(text)] == ["H200", "A100"]
    module.write_text('"""A 4096 x 32768 loss, beam 5, sm_90 PTX, float16 and T5 are not GPUs."""  # noqa: A002\n')
    assert not [text for _, text in _prose(module) if GPU.search(text)]
