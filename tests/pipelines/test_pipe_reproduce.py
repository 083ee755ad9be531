"""reproduce.py, the command line of the steps (their tests: test_pipe_reproduce_<step>.py): an option refused
before any step starts, and the script run from a source checkout without `pip install`."""
import os
from pathlib import Path

import pytest

from pipeline_helpers import load_script

rep = load_script("scripts/reproduce/reproduce.py")


def test_negative_retries_are_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        rep.main(["train", "peters2019-table1", "--only", "medium/out1-attn1", "--retries", "-1"])
    assert "--retries -1: give 0" in capsys.readouterr().err


def test_reproduce_runs_from_a_source_checkout_without_pip_install(tmp_path):
    """The script's own fallback puts the checkout on sys.path before any helper imports the package:
    run with every installed copy of onmt_entmax hidden (editable finder and site-packages path
    entries dropped), from a folder outside the checkout, it still prints the table."""
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[2]
    script = repo / "scripts" / "reproduce" / "reproduce.py"
    hide = (
        "import sys, runpy\n"
        "sys.meta_path = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '') + repr(f)]\n"
        f"sys.path = [p for p in sys.path if p not in ('', {str(repo)!r})]\n"
        "try:\n    import onmt_entmax\nexcept ImportError:\n    pass\n"
        "else:\n    sys.exit('onmt_entmax still importable: the test hides nothing')\n"
        f"sys.argv = [{str(script)!r}, 'table', 'peters2019-table1']\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ONMT_ENTMAX_DISABLE"] = "1"
    out = subprocess.run([sys.executable, "-c", hide], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "82.55" in out.stdout  # the paper's softmax/softmax number, beside ours
