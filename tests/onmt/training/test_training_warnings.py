"""Training-side advice: label smoothing with a sparse output layer is allowed, but the user is told
that it makes the output dense (measured on Multi30k, docs/results.md)."""
from torch import nn

from onmt_entmax.modules import EntmaxGenerator
from onmt_entmax.onmt.training.loss import label_smoothing_warning
from onmt_entmax.registry import get_transformation


def _gen(name, **kw):
    return EntmaxGenerator.from_linear(nn.Linear(4, 6), get_transformation(name, **kw))


def test_label_smoothing_with_a_sparse_output_names_the_option_and_the_fix():
    msg = label_smoothing_warning(_gen("entmax15"), 0.1)
    assert "label_smoothing 0.1" in msg and "generator_function entmax15" in msg and "label_smoothing 0" in msg
    assert label_smoothing_warning(_gen("alpha_relu", alpha=1.5), 0.2) is not None


def test_no_warning_without_smoothing_or_for_softmax():
    assert label_smoothing_warning(_gen("sparsemax"), 0.0) is None
    assert label_smoothing_warning(_gen("softmax"), 0.1) is None
