"""Training options of the plugin's training features, one row each.

``TRAINING_OPTIONS`` declares each option once (``options.table.Option``, section ``training``: OpenNMT-py's
training options, Eole's ``training:`` section). The features' modules (``onmt_entmax.training``, the
adapters' ``training`` packages) say what each option does, what a resumed run takes it from, and check
its values.
"""
from __future__ import annotations

from .table import Option

TRAINING_OPTIONS = (
    Option("valid_lr_halving", bool, False,
           "Halve the learning rate whenever the validation loss per target token rises above the previous "
           "validation's (Peters et al. 2019); kept across train_from. One GPU only. It replaces the step decay "
           "(start_decay_steps, decay_steps, learning_rate_decay).", "training"),
    Option("valid_lr_halving_every", int, 1,
           "With valid_lr_halving: compare only every k-th validation's loss, with the loss k validations "
           "before (the paper's medium SIGMORPHON runs validate every 10 epochs).", "training",
           minimum=1, strict=True),  # (a YAML boolean would read as every validation)
    Option("shuffle_each_pass", bool, False,
           "Read each training corpus in a new random order on every pass (epoch), as the torchtext iterator "
           "of OpenNMT-py <= 0.9 did; the toolkit reads the files in the same order every pass, so a "
           "length-sorted bucket yields much the same batches each time. Seeded by seed and the name of the "
           "train_from checkpoint; a pass is held in memory while it is read.", "training"),
    # two values OpenNMT-py 3.5.1 fixes and Peters et al.'s fork of OpenNMT-py 0.6 set otherwise
    Option("embeddings_dropout", float, None,
           "Dropout probability of the word embeddings' output (source and target). Unset: -dropout, as "
           "upstream. Peters et al.'s fork of OpenNMT-py 0.6 had none in its RNNs' embeddings (0).", "training",
           toolkits=("onmt",)),
    Option("adam_eps", float, None,
           "Adam's epsilon (-optim adam or sparseadam). Unset: OpenNMT-py 3.5.1's fixed 1e-8. Peters et al.'s "
           "fork of OpenNMT-py 0.6 used 1e-9.", "training", toolkits=("onmt",)),
    Option("rnn_cuda_graphs", bool, False,
           "Training on a GPU: run the input-feed RNN decoder's steps as CUDA graphs, one per shape of batch "
           "(targets padded to a multiple of 4 steps, sources to 8 positions; the loss sees the same numbers). "
           "Needs accum_count 1, float32 and no coverage_attn or context_gate; on a CPU it changes nothing.",
           "training", toolkit_help={  # what the graphs cannot replay differs between the toolkits' decoders
               "onmt": "Training on a GPU: run the input-feed RNN decoder's steps (decoder_type rnn, input_feed 1) "
                       "as CUDA graphs, one per shape of batch (targets padded to a multiple of 4 steps, sources "
                       "to 8 positions; the loss sees the same numbers). Takes the per-step kernel launches off "
                       "the host. Needs accum_count 1 and no truncated_decoder, copy_attn, coverage_attn or "
                       "fp16; on a CPU it changes nothing."}),
    Option("adam_fused", bool, False,
           "Adam (optim adam): update the parameters with torch's fused Adam, one kernel a step for all of them, "
           "instead of torch's default (on a GPU about a dozen kernels a step). The same update up to the order of "
           "floating-point operations; on the CPU too. A training option: a resumed run takes it from the command.",
           "training"),
)
