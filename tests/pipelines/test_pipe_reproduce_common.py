"""The experiments ``--only`` selects and the command runner, which the steps share (steps/common.py)."""
import sys

import pytest

from steps.common import experiments, run


def test_unknown_table_is_named():
    with pytest.raises(SystemExit, match="unknown table 'table9'"):
        experiments("table9")


def test_only_takes_several_globs():
    names = [e.name for e in experiments("peters2019-table1", ["medium/out1-attn1", "medium/out1.5-attn1.5"])]
    assert names == ["medium/out1-attn1", "medium/out1.5-attn1.5"]
    assert len(experiments("peters2019-table1", "medium/*")) == 9


def test_runs_come_in_the_order_only_names_them():
    """`train --only B A --jobs 1` trains B first: a lease can finish the carried runs before it starts
    a new one, whatever the table's order (each glob's own matches keep the table's order)."""
    names = [e.name for e in experiments("peters2019-table1", ["medium/out2-attn2", "medium/out1-attn*"])]
    assert names == ["medium/out2-attn2", "medium/out1-attn1", "medium/out1-attn1.5", "medium/out1-attn2"]
    assert [e.name for e in experiments("peters2019-table1", "medium/*")][0] == "medium/out1-attn1"


def test_a_failed_command_stops_with_its_name_status_and_log_tail_not_a_traceback(tmp_path):
    log = tmp_path / "pred.test.log"
    fail = [sys.executable, "-c", "import sys; print('No module named onmt_entmax'); sys.exit(3)"]
    with pytest.raises(SystemExit) as err:
        run(fail, cwd=tmp_path, log=log)
    message = str(err.value.code)
    assert "failed (exit status 3)" in message and str(log) in message
    assert message.splitlines()[-1] == "No module named onmt_entmax"
    with pytest.raises(SystemExit, match=r"failed \(exit status 3\); its output is above"):
        run(fail, cwd=tmp_path)
