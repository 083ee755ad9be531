"""Decoding hooks (``onmt.translate``, ``onmt.decoders.ensemble``): the model's own log-probabilities,
-inf-correct beam search, raw-probability ensembles, certificates and analyses; and the tools that
run a checkpoint outside ``onmt_translate`` (``api.SparseDecoder``, ``teacher_forcing``)."""
