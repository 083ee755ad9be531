"""The patch machinery (onmt_entmax/patching.py): several rows of one target stack."""
import sys

from onmt_entmax import patching


def _toy_module(monkeypatch):
    import types

    module = types.ModuleType("onmt_entmax_toy_target")
    module.f = lambda x: [x]
    user = types.ModuleType("onmt_entmax_toy_user")  # a module that ran ``from toy import f`` before we did
    user.f = module.f
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(sys.modules, user.__name__, user)
    return module, user


def test_rows_of_one_target_stack_in_table_order_each_once_and_original_is_stock(monkeypatch):
    module, user = _toy_module(monkeypatch)
    stock = module.f
    target = "onmt_entmax_toy_target:f"
    rows = patching.PatchSet([
        patching.Patch("first", "inner", target, lambda up: lambda x: up(x) + ["first"],
                       aliases=("onmt_entmax_toy_user:f",)),
        patching.Patch("second", "outer", target, lambda up: lambda x: up(x) + ["second"]),
    ])
    assert rows.apply() == ["first", "second"]
    rows.apply()  # idempotent: no row wraps twice
    assert module.f(0) == [0, "first", "second"] and user.f(0) == [0, "first", "second"]
    assert patching.wrapper_names(module.f) == ["second", "first"]
    assert rows.original("first") is stock and rows.original("second") is stock
