"""The plugin is active in every process: fresh interpreters, processes they spawn, and both kinds
of pip install ship the .pth line that does it."""
import importlib.util
import sys
import zipfile

import pytest

from onmt_testkit import REPO, run_console

from onmt_entmax.autoload import HOOK_VERSION, PTH_NAME, pth_line

CHECK = ("import onmt, onmt_entmax.onmt as o, onmt.opts; "
         "print(o.is_active(), hasattr(onmt.opts.model_opts, '__wrapped__'))")


def test_fresh_interpreter_is_patched_on_import_onmt_and_can_opt_out(tmp_path):
    on = run_console([sys.executable, "-c", CHECK], cwd=tmp_path)
    assert on.stdout.split() == ["True", "True"], on.stderr[-2000:]
    off = run_console([sys.executable, "-c", CHECK], cwd=tmp_path, env={"ONMT_ENTMAX_DISABLE": "1"})
    assert off.stdout.split() == ["False", "False"], off.stderr[-2000:]


def test_importing_the_patch_list_before_onmt_is_safe(tmp_path):
    """Regression: a module of the patch chain importing onmt at import time re-entered activate()."""
    code = ("import onmt_entmax.onmt.patches as p, onmt, onmt_entmax.onmt as o; "
            "print(o.is_active(), len(p.applied()) > 0)")
    proc = run_console([sys.executable, "-c", code], cwd=tmp_path)
    assert proc.stdout.split() == ["True", "True"], proc.stderr[-2000:]


def test_start_up_imports_nothing_heavy(tmp_path):
    proc = run_console([sys.executable, "-c", "import sys; print('torch' in sys.modules, 'onmt' in sys.modules)"],
                       cwd=tmp_path)
    assert proc.stdout.split() == ["False", "False"]


def test_a_newer_hook_replaces_the_one_of_an_earlier_install(tmp_path):
    """An earlier install's .pth line (an older hook) must not keep the new one from running."""
    code = ("import sys\n"
            "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, '_onmt_entmax_hook', 0)]\n"
            "class Old:\n    _onmt_entmax_hook = True\n    def find_spec(self, *args): return None\n"
            "sys.meta_path.insert(0, Old())\n"
            "from onmt_entmax.autoload import install_hook\n"
            "install_hook(); install_hook()\n"
            "print([getattr(f, '_onmt_entmax_hook', 0) for f in sys.meta_path "
            "if getattr(f, '_onmt_entmax_hook', 0)])\n")
    proc = run_console([sys.executable, "-c", code], cwd=tmp_path)
    assert proc.stdout.strip() == f"[{HOOK_VERSION}]", proc.stderr[-2000:]


def test_a_hook_whose_package_is_gone_says_so_in_one_line(tmp_path):
    """A start-up hook left behind by a broken install (the package no longer importable) ends
    `import onmt` with one line that says what to do, not a traceback from inside the import system."""
    code = ("import os, sys\n"
            "os.environ.pop('ONMT_ENTMAX_DISABLE', None)\n"
            "from onmt_entmax.autoload import HOOK_SOURCE\n"
            "for name in [m for m in sys.modules if m.startswith('onmt_entmax')]:\n"
            "    del sys.modules[name]\n"
            "sys.modules['onmt_entmax'] = None  # (what a removed package looks like to import)\n"
            "exec(HOOK_SOURCE, {'__name__': 'onmt_entmax_autoload'})\n"
            "import onmt\n")
    proc = run_console([sys.executable, "-c", code], cwd=tmp_path, env={"ONMT_ENTMAX_DISABLE": "1"})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"onmt-entmax: its start-up hook ({PTH_NAME} in site-packages)"), \
        proc.stderr[-2000:]
    assert "reinstall onmt-entmax, or set ONMT_ENTMAX_DISABLE=1 to run onmt stock" in lines[0]


SPAWN = """
import multiprocessing as mp

def child(q):
    import onmt, onmt_entmax.onmt as o
    q.put(o.is_active())

if __name__ == "__main__":
    ctx = mp.get_context("spawn")  # what OpenNMT-py uses for GPUs, data loaders and inference
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start(); print("child active:", q.get()); p.join()
"""


def test_spawned_children_are_patched(tmp_path):
    (tmp_path / "spawner.py").write_text(SPAWN)
    proc = run_console([sys.executable, "spawner.py"], cwd=tmp_path)
    assert "child active: True" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("editable", [False, True], ids=["pip install .", "pip install -e ."])
def test_wheels_ship_the_pth_line(tmp_path, editable):
    if not editable and not (importlib.util.find_spec("wheel")
                             or importlib.util.find_spec("setuptools.command.bdist_wheel")):
        pytest.skip("building a wheel needs setuptools >= 70.1 or the `wheel` package")
    hook = "build_editable" if editable else "build_wheel"
    code = (f"import setuptools.build_meta as b; print(b.{hook}({str(tmp_path)!r}))")
    proc = run_console([sys.executable, "-c", code], cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = tmp_path / proc.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as zf:
        names = {n: n for n in zf.namelist() if n.endswith(PTH_NAME)}
        assert len(names) == 1, zf.namelist()
        name = next(iter(names))
        # a plain wheel: site-packages root; an editable one: <dist>.data/purelib/ (also the root)
        assert name == PTH_NAME or name.endswith(f".data/purelib/{PTH_NAME}")
        assert zf.read(name).decode() == pth_line()
