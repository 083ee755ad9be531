"""onmt_train_adam_eps.py: OpenNMT-py's Adam built with the ε given instead of its hard-coded 1e-8."""
from types import SimpleNamespace

import pytest
import torch

from pipeline_helpers import load_script

script = load_script("scripts/reproduce/onmt_train_adam_eps.py")


def test_opennmt_builds_adam_with_the_given_eps(monkeypatch):
    from onmt.utils.optimizers import build_torch_optimizer

    monkeypatch.setattr(torch.optim, "Adam", torch.optim.Adam)  # (restored after the test)
    opt = SimpleNamespace(optim="adam", learning_rate=1e-3, adam_beta1=0.9, adam_beta2=0.999,
                          model_dtype="fp32", apex_opt_level="")
    model = torch.nn.Linear(3, 2)
    assert build_torch_optimizer(model, opt).param_groups[0]["eps"] == 1e-8  # OpenNMT-py 3.5.1's own
    script.set_adam_eps(1e-9)
    assert build_torch_optimizer(model, opt).param_groups[0]["eps"] == 1e-9


def test_a_non_positive_eps_is_refused_before_training(capsys):
    with pytest.raises(SystemExit):
        script.main(["--adam_eps", "0", "-config", "nowhere.yaml"])
    assert "--adam_eps 0.0: give a number above 0" in capsys.readouterr().err
