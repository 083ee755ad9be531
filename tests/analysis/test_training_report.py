"""The sparsity counts training reports (both adapters): counted on the device, read back once a batch,
and taken from the loss where it already computed them."""
import torch
from torch import nn

from onmt_entmax import ops
from onmt_entmax.analysis.training_report import attention_counts, output_nonzeros, settle
from onmt_entmax.modules import EntmaxGenerator, TransformationLoss
from onmt_entmax.registry import get_transformation


def test_sparsity_counts_of_a_batch_match_a_direct_count_and_come_back_as_numbers():
    """Counted on the device without indexing (no host sync a count), read back once a batch."""
    attn = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]], [[0.2, 0.3, 0.5], [0.0, 0.0, 0.0]]])  # (B, T, S)
    keep = torch.tensor([True, True, True, False])  # the last target position is padding
    nnz, rows = attention_counts(attn, keep, time_first=False)
    sums = {"attn_nnz": 1.0 + nnz, "attn_rows": 2 + rows, "out_nnz": 7.0}
    settle(sums)
    assert sums == {"attn_nnz": 1.0 + 2 + 1 + 3, "attn_rows": 2 + 3, "out_nnz": 7.0}
    assert all(type(v) is float for v in sums.values())
    assert attention_counts(attn, keep[:3], time_first=False) is None  # shapes differ: not counted


def test_output_sparsity_comes_from_the_loss_of_the_same_target_without_a_second_mapping(monkeypatch):
    gen = EntmaxGenerator.from_linear(nn.Linear(4, 9), get_transformation("entmax15"))
    crit = TransformationLoss(gen, ignore_index=1)
    scores, target = torch.randn(6, 9) * 3, torch.tensor([0, 1, 2, 3, 1, 8])
    keep = target.ne(1)
    expected = ((ops.entmax15(scores, -1) > 0) & keep[:, None]).sum()
    crit(scores, target)
    with monkeypatch.context() as m:
        m.setattr(gen, "probs", lambda z: 1 / 0)  # not called: the loss counted the support
        assert output_nonzeros(crit, gen, scores, target, keep, 1) == expected
    other = target.clone()  # not the target the criterion saw: counted from the probabilities
    assert output_nonzeros(crit, gen, scores, other, keep, 1) == expected
    assert output_nonzeros(nn.CrossEntropyLoss(), gen, scores, target, keep, 1) == expected
