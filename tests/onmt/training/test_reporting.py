"""What the training reports say: the loss by its name, and sparsity numbers for every model that has
them, a softmax output with sparse attention included."""
from onmt.utils.report_manager import ReportMgr
from onmt.utils.statistics import Statistics

import onmt_testkit  # noqa: F401  (activates the plugin)


def _stats(attn_nnz, rows, loss_name=None):
    s = Statistics(loss=2.0, n_batchs=1, n_sents=2, n_words=10, n_correct=5)
    s.entmax_sums = {"attn_nnz": attn_nnz, "attn_rows": rows}
    if loss_name:
        s.entmax_loss_name = loss_name
    return s


def _lines(mgr, **kw):
    said = []
    mgr.log = lambda fmt, *args: said.append(fmt % args if args else fmt)
    mgr._report_step(0.001, None, 100, **kw)
    return said


def test_softmax_output_validation_reports_attention_sparsity():
    said = _lines(ReportMgr(report_every=1), valid_stats=_stats(30.0, 10), train_stats=_stats(20.0, 10))
    assert "Validation attn nnz: 3.000" in said and "Train attn nnz: 2.000" in said
    assert any(line.startswith("Validation perplexity") for line in said)  # upstream's lines are kept


def test_sparse_output_validation_names_the_loss_and_reports_sparsity():
    said = _lines(ReportMgr(report_every=1), valid_stats=_stats(30.0, 10, "entmax15 FY loss"))
    assert "Validation entmax15 FY loss: 0.2" in said and "Validation attn nnz: 3.000" in said
    assert not any("perplexity" in line for line in said)


def test_learned_alphas_take_one_line_by_kind_of_attention_and_layer_order():
    from onmt_entmax.onmt.training.reporting import alphas_line

    alphas = {f"encoder.transformer.{i}.self_attn": [1.5 + i / 100, 1.4] for i in (10, 2, 0, 1)}
    alphas.update({f"decoder.transformer_layers.{i}.{kind}": [a, 1.999] for i, a in ((1, 1.31), (0, 1.7))
                   for kind in ("context_attn", "self_attn")})
    assert alphas_line(alphas) == ("learned alpha enc: 1.50 1.40 / 1.51 1.40 / 1.52 1.40 / 1.60 1.40"
                                   " | dec self: 1.70 2.00 / 1.31 2.00 | ctx: 1.70 2.00 / 1.31 2.00")
