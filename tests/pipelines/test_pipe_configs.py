"""Every generated config is current, passes onmt_train's own option parsing and validation with the
plugin's Entmax checks, and reads the files the data pipeline writes."""
import sys

import pytest
import yaml

from pipeline_helpers import ROOT, load_script

mk = load_script("scripts/reproduce/make_configs.py")
E = sys.modules["experiments"]
prep = load_script("scripts/data/prepare_mt.py")
CONFIGS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").rglob("*.yaml")
                 if "examples" not in p.parts and "eole" not in p.parts)  # (Eole's: tests/eole/test_eole_options.py)


def test_configs_on_disk_are_what_the_generator_writes():
    planned = mk.planned()
    stale = [str(p) for p, text in planned.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not stale, "run scripts/reproduce/make_configs.py"
    assert sorted(p.relative_to(ROOT).as_posix() for p in planned) == CONFIGS  # and no orphan config


def test_every_table_cell_has_one_experiment():
    for name, table in E.TABLES.items():
        cells = [(e.row, e.column) for e in E.all_experiments() if e.table == name]
        assert len(cells) == len(set(cells)), name
        assert {r for r, _ in cells} == set(table.rows), name


def test_the_fork_settings_runs_differ_from_their_table1_twins_only_by_those_settings():
    """peters2019-table1-fork measures what the three settings do: nothing else may differ, and the
    runs keep a folder of their own."""
    twins = {(e.column, e.row): e for e in E.all_experiments() if e.table == "peters2019-table1"}
    fork = [e for e in E.all_experiments() if e.table == "peters2019-table1-fork"]
    assert fork
    for e in fork:
        twin = twins[(e.column, e.row)]
        differ = {k for k in {*e.config, *twin.config} if e.config.get(k) != twin.config.get(k)}
        assert differ == {"save_model", *E.FORK_SETTINGS}, e.name
        assert e.run_dir != twin.run_dir and e.config["save_model"].startswith(e.run_dir + "/")


@pytest.fixture(scope="module")
def train_parser():
    pytest.importorskip("onmt")
    try:
        import onmt_entmax.onmt as plugin

        if not plugin.is_active():
            plugin.activate()
    except Exception as err:  # the integration (issue 3) is not installed
        pytest.skip(f"onmt-entmax OpenNMT-py integration not available: {err!r}")
    from onmt.bin.train import _get_parser

    return _get_parser()


@pytest.mark.parametrize("config", CONFIGS)
def test_config_passes_onmt_train_option_validation(config, train_parser):
    from onmt.utils.parse import ArgumentParser

    opt, unknown = train_parser.parse_known_args(["-config", str(ROOT / config)])
    assert unknown == [], f"{config}: options onmt_train would silently ignore: {unknown}"
    ArgumentParser.validate_train_opts(opt)
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)  # with the plugin: alpha, tau, learn_alpha checks
    cfg = yaml.safe_load((ROOT / config).read_text())
    for key, value in cfg.items():  # YAML values really reached the options
        if key != "data" and not isinstance(value, (list, dict)):
            assert getattr(opt, key) == value, key


def test_mt_configs_read_files_the_recipes_write():
    for e in E.all_experiments():
        if e.task != "mt":
            continue
        recipe = prep.RECIPES[e.corpus]
        assert {e.src, e.tgt} == set(recipe.langs), e.path
        for split, corpus in (("train", "corpus_1"), ("dev", "valid")):
            assert e.config["data"][corpus] == {"path_src": f"work/data/{e.corpus}/{split}.bpe.{e.src}",
                                                "path_tgt": f"work/data/{e.corpus}/{split}.bpe.{e.tgt}"}


def test_validation_and_checkpoints_coincide():
    """reproduce.py picks the best checkpoint by validation accuracy: every validation must save one."""
    for e in E.all_experiments():
        assert e.config["valid_steps"] == e.config["save_checkpoint_steps"], e.path
        assert e.config["keep_checkpoint"] == -1, e.path


def test_bad_config_is_refused_by_the_validation(train_parser, tmp_path):
    from onmt.utils.parse import ArgumentParser

    bad = yaml.safe_load((ROOT / "configs/peters2019-mt/de-en/entmax15.yaml").read_text())
    bad["generator_alpha"] = 0.5
    bad["generator_function"] = "entmax_bisect"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    opt, _ = train_parser.parse_known_args(["-config", str(path)])
    with pytest.raises(ValueError, match="generator_alpha"):
        ArgumentParser.update_model_opts(opt)
        ArgumentParser.validate_model_opts(opt)
