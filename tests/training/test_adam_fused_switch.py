"""onmt_entmax.training.adam_fused: switching a torch Adam between its default and fused implementations keeps
its update and its state, the step counts moved where each implementation reads them."""
import copy

import pytest
import torch

from onmt_entmax.training.adam_fused import apply, refusal, set_fused

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _train(model, optimizer, steps: int, x) -> None:
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).pow(2).sum().backward()
        optimizer.step()


@pytest.mark.parametrize("device", DEVICES)
def test_switching_mid_run_gives_the_same_weights_as_never_switching(device):
    torch.manual_seed(0)
    a = torch.nn.Linear(6, 4).to(device)
    b = copy.deepcopy(a)
    x = torch.randn(9, 6, device=device)
    opt_a, opt_b = (torch.optim.Adam(m.parameters(), lr=1e-2) for m in (a, b))
    _train(a, opt_a, 5, x)
    _train(b, opt_b, 2, x)
    set_fused(opt_b, True)  # a resumed run, now fused
    steps = [opt_b.state[p]["step"] for p in b.parameters()]
    assert all(s.device.type == device and s.dtype == torch.float32 and float(s) == 2 for s in steps)
    _train(b, opt_b, 2, x)
    set_fused(opt_b, False)  # and back
    assert all(opt_b.state[p]["step"].device.type == "cpu" for p in b.parameters())
    _train(b, opt_b, 1, x)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pb, pa, rtol=1e-5, atol=1e-7)


def test_apply_switches_adam_only_and_undoes_a_loaded_fused_state():
    sgd = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    apply(sgd, True)
    assert "fused" not in sgd.param_groups[0] or not sgd.param_groups[0]["fused"]
    adam = torch.optim.Adam(torch.nn.Linear(2, 2).parameters())
    apply(adam, False)
    assert adam.param_groups[0]["fused"] is None  # untouched: upstream's own
    apply(adam, True)
    assert adam.param_groups[0]["fused"] is True
    apply(adam, False)
    assert adam.param_groups[0]["fused"] is None and adam.param_groups[0]["foreach"] is None


def test_only_adam_is_accepted():
    assert refusal(True, "adam") is None and refusal(False, "sgd") is None
    assert refusal(True, "sparseadam") == ("-adam_fused is an implementation of Adam: "
                                           "it needs -optim adam, not sparseadam")
