"""The Eole adapter is active in every process Eole starts, can be turned off, and refuses an Eole
outside the tested range in one line."""
import os
import sys

from eole_testkit import REPO, run_console

CHECK = ("import eole, onmt_entmax.eole as a, eole.utils.loss as l; "
         "print(a.is_active(), hasattr(l.LossCompute.from_config, '__wrapped__'))")

SPAWN = """
import multiprocessing as mp

def child(q):
    import eole, onmt_entmax.eole as a
    q.put(a.is_active())

if __name__ == "__main__":
    ctx = mp.get_context("spawn")  # what eole train uses for one process per GPU
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start(); print("child active:", q.get()); p.join()
"""


def test_import_eole_activates_the_adapter_and_opting_out_runs_eole_stock(tmp_path):
    on = run_console([sys.executable, "-c", CHECK], cwd=tmp_path)
    assert on.stdout.split() == ["True", "True"], on.stderr[-2000:]
    off = run_console([sys.executable, "-c", CHECK], cwd=tmp_path, env={"ONMT_ENTMAX_DISABLE": "1"})
    assert off.stdout.split() == ["False", "False"], off.stderr[-2000:]


def test_processes_eole_spawns_are_patched(tmp_path):
    (tmp_path / "spawner.py").write_text(SPAWN)
    proc = run_console([sys.executable, "spawner.py"], cwd=tmp_path)
    assert "child active: True" in proc.stdout, proc.stderr[-2000:]


def test_an_eole_outside_the_tested_range_is_refused_in_one_line(tmp_path):
    fake = tmp_path / "fake" / "eole"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "0.7.0"\n')
    path = os.pathsep.join([str(tmp_path / "_site"), str(fake.parent), str(REPO)])  # the fake eole first
    proc = run_console([sys.executable, "-c", "import eole"], cwd=tmp_path, env={"PYTHONPATH": path})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "onmt-entmax: Eole 0.7.0 is not supported (onmt-entmax works with Eole >= 0.6.4, < 0.7; tested: 0.6.4). "
        "Install it with `pip install eole==0.6.4`, or set ONMT_ENTMAX_DISABLE=1 to run Eole without onmt-entmax."]
