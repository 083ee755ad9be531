"""Every change this plugin makes to OpenNMT-py 3.5.1, in one list, applied by ``apply_patches()``.

A ``Patch`` (``onmt_entmax.patching``) either wraps one upstream attribute, calling the upstream
object so no upstream code is copied, or runs a registration function. ``apply_patches`` is
idempotent; each wrapped object keeps the upstream one as ``__wrapped__`` and ``original(name)``
returns it. docs/integration.md explains each entry. Other parts of the plugin add their entries to
``PATCHES`` (one line each).
"""
from __future__ import annotations

import importlib
import logging

from onmt_entmax.decoding.log_probs_hook import make_log_softmax, wrap_decode_and_generate
from onmt_entmax.errors import CheckpointError
from onmt_entmax.patching import Patch, PatchSet
from onmt_entmax.training import early_stopping, optimizer_state
from onmt_entmax.training.cuda_graphs import graphed_loop
from onmt_entmax.training.data_order import wrap_init_datasets
from onmt_entmax.training.host import backward_on_calling_thread
from onmt_entmax.training.resume_state import wrap_load_state_dict, wrap_state_dict
from onmt_entmax.training.signals import stop_between_steps, stop_on_signal

from . import checkpoint, errors, files, options, upstream_noise, validation
from .decoding import beam
from .model import building, fused_attention, loading, rnn_attention
from .training import adam_fused, cuda_graphs, data_order, fork_settings, loss, lr_halving, reporting, valid_batches


def _decoding(module: str):
    """``onmt_entmax.onmt.decoding.<module>``, imported when its first row is applied (not at activation)."""
    return importlib.import_module(f"onmt_entmax.onmt.decoding.{module}")


TRAIN_OPTS = "onmt.utils.parse:ArgumentParser.validate_train_opts"


def _train_check(check):
    """The wrapper of a row of ``TRAIN_OPTS``: what ran before, then ``check(opt)``."""
    return lambda up: validation.wrap_validate_train_opts(up, check)


PATCHES: list[Patch] = [
    Patch("upstream_noise", "upstream's deprecation warnings (at their source) and repeated corpus lines filtered",
          apply=upstream_noise.quiet, extends=("warnings:filters", "onmt.utils.logging:logger.filters")),
    Patch("model_options", "add the Entmax group to model_opts (train -h, checkpoints, defaults for old ones)",
          "onmt.opts:model_opts", options.wrap_model_opts),
    Patch("translate_options", "translate-time overrides of the Entmax options, under the same group",
          "onmt.opts:translate_opts", options.wrap_translate_opts, aliases=("onmt.bin.translate:translate_opts",)),
    Patch("misspelled_options", "onmt_train ignores unknown keys; refuse ones that look like Entmax options",
          "onmt.utils.parse:ArgumentParser.parse_known_args", options.wrap_parse_known_args),
    Patch("usage_errors", "a usage error is one line (upstream prints some 200 lines of usage above it)",
          "onmt.utils.parse:ArgumentParser.error", options.wrap_error),
    Patch("validate_options", "check Entmax options (alpha >= 1, tau, copy_attn, learn_alpha) before training",
          "onmt.utils.parse:ArgumentParser.validate_model_opts", validation.wrap_validate_model_opts),
    # onmt_train's option checks, one row a feature: each runs after the rows above it, so the first refusal in
    # table order is the one given
    Patch("valid_lr_halving_options", "training only: valid_lr_halving needs validation data, world_size 1 and no "
          "other schedule", TRAIN_OPTS, _train_check(lr_halving.check_train_opts)),
    Patch("rnn_cuda_graphs_options", "training only: rnn_cuda_graphs needs what its graphs replay (the input-feed "
          "LSTM decoder, accum_count 1, float32)", TRAIN_OPTS,
          _train_check(cuda_graphs.check_train_opts)),
    Patch("embeddings_dropout_options", "training only: embeddings_dropout a probability, without a dropout schedule",
          TRAIN_OPTS, _train_check(fork_settings.check_embeddings_dropout)),
    Patch("adam_eps_options", "training only: adam_eps above 0, for an Adam optimizer", TRAIN_OPTS,
          _train_check(fork_settings.check_adam_eps)),
    Patch("adam_fused_options", "training only: adam_fused for an Adam optimizer", TRAIN_OPTS,
          _train_check(adam_fused.check_train_opts)),
    Patch("save_model_folder", "training only: -save_model's folder a folder or makeable", TRAIN_OPTS,
          _train_check(files.check_save_model)),
    Patch("validate_train_options", "training only: label_smoothing in [0, 1); options the new model would ignore "
          "are refused", TRAIN_OPTS, _train_check(validation.check_training_opts)),
    Patch("corpus_files", "onmt_train, onmt_build_vocab: a missing corpus file named in one line, not a traceback; "
          "onmt_build_vocab's vocabularies never a corpus file",
          "onmt.utils.parse:DataOptsCheckerMixin.validate_prepare_opts", files.wrap_validate_prepare_opts),
    Patch("train_log_file", "onmt_train: -log_file never a file it reads (before upstream opens it)",
          "onmt.bin.train:train", files.wrap_train),
    Patch("one_run_per_save_model", "onmt_train: -save_model never holds another run's checkpoints (unless "
          "-train_from resumes it), checked before the first step", "onmt.models.model_saver:build_model_saver",
          files.wrap_build_model_saver,
          aliases=("onmt.models:build_model_saver", "onmt.train_single:build_model_saver")),
    Patch("train_from_options", "-train_from: name the given model options the checkpoint's replace",
          "onmt.train_single:_get_model_opts", validation.wrap_get_model_opts),
    Patch("build_base_model", "install our generator and attention normalizers before weights are loaded "
          "(loaded for a GPU: start the kernels' host set-up)",
          "onmt.model_builder:build_base_model", building.wrap_build_base_model),
    Patch("build_model", "start learnable alphas at the configured alpha, not param_init noise",
          "onmt.model_builder:build_model", building.wrap_build_model, aliases=("onmt.train_single:build_model",)),
    Patch("copy_generator_keys", "a copy_attn checkpoint loads (upstream looks its generator's weights up by names "
          "its checkpoints do not use)", "onmt.models.model:BaseModel.load_state_dict", loading.wrap_load_state_dict),
    Patch("loss_criterion", "Fenchel-Young criterion of the model's generator (upstream sparsemax crashes)",
          "onmt.utils.loss:LossCompute.from_opts", loss.wrap_from_opts),
    Patch("loss_forward", "resolve generator_tau auto on the first batch; attention sparsity and alphas",
          "onmt.utils.loss:LossCompute.forward", loss.wrap_forward),
    Patch("loss_stats", "name the loss; nonzero output probabilities per token",
          "onmt.utils.loss:LossCompute._stats", loss.wrap_stats),
    Patch("stats_update", "accumulate the sparsity sums across batches and GPUs",
          "onmt.utils.statistics:Statistics.update", reporting.wrap_update),
    Patch("stats_output", "log the FY loss instead of a perplexity; sparsity; learned alphas",
          "onmt.utils.statistics:Statistics.output", reporting.wrap_output),
    Patch("stats_tensorboard", "the same numbers in tensorboard (alpha per head and layer)",
          "onmt.utils.statistics:Statistics.log_tensorboard", reporting.wrap_log_tensorboard),
    Patch("report_step", "no 'perplexity' lines for a FY loss",
          "onmt.utils.report_manager:ReportMgr._report_step", reporting.wrap_report_step),
    Patch("rnn_attention_forward", "RNN global attention runs our normalizer",
          "onmt.modules.global_attention:GlobalAttention.forward", rnn_attention.wrap_forward),
    Patch("rnn_attention_sparsemax", "the name upstream calls for non-softmax attention dispatches to it",
          "onmt.modules.global_attention:sparsemax", rnn_attention.make_dispatch),
    Patch("fused_attention_forward", "sparse attention takes upstream's SDPA branch (one call, one autograd node)",
          "onmt.modules.multi_headed_attn:MultiHeadedAttention.forward", fused_attention.wrap_forward),
    Patch("fused_attention_sdpa", "that branch's scaled_dot_product_attention runs the module's sparse normalizer",
          "onmt.modules.multi_headed_attn:scaled_dot_product_attention", fused_attention.make_sdpa),
    Patch("translator_generator", "decoding sees which generator is running",
          "onmt.translate.translator:Inference._decode_and_generate", wrap_decode_and_generate),
    Patch("translator_log_probs", "log of the model's own probabilities (-inf for zeros) instead of log_softmax",
          "onmt.translate.translator:log_softmax", make_log_softmax),
    Patch("search_sizes", "onmt_translate: beam_size and n_best >= 1 (before the model loads)",
          "onmt.utils.parse:ArgumentParser.validate_translate_opts", validation.wrap_validate_translate_opts),
    Patch("translate_files", "onmt_translate's outputs writable and never an input, -src without blank lines, "
          "-tgt line for line (before the model loads)",
          "onmt.utils.parse:ArgumentParser.validate_translate_opts", files.wrap_validate_translate_opts),
    Patch("load_test_model", "translate-time overrides; refuse an alpha_relu model without tau, and -src lines "
          "or a -max_length beyond the model's position table",
          "onmt.model_builder:load_test_model", loading.wrap_load_test_model),
    Patch("train_options", "the training options valid_lr_halving (Peters et al.'s learning-rate schedule), "
          "shuffle_each_pass (their data order), embeddings_dropout and adam_eps (their code's values), "
          "rnn_cuda_graphs and adam_fused (options.training's rows), in the Entmax group",
          "onmt.opts:_add_train_general_opts", options.wrap_train_opts),
    Patch("embeddings_dropout", "with it, the word embeddings drop that share of their output instead of -dropout's",
          "onmt.model_builder:build_embeddings", fork_settings.wrap_build_embeddings),
    Patch("adam_eps", "with it, Adam is built with that epsilon instead of upstream's fixed 1e-8",
          "onmt.utils.optimizers:build_torch_optimizer", fork_settings.wrap_build_torch_optimizer),
    Patch("adam_fused", "with it, Adam is built as torch's fused Adam",
          "onmt.utils.optimizers:build_torch_optimizer", adam_fused.wrap_build_torch_optimizer),
    Patch("valid_lr_halving_flag", "the optimizer remembers whether to halve, and has no step decay then",
          "onmt.utils.optimizers:Optimizer.from_opt", lr_halving.wrap_from_opt),
    Patch("adam_eps_resume", "adam_eps holds after a resumed optimizer state is loaded",
          "onmt.utils.optimizers:Optimizer.from_opt", fork_settings.wrap_optimizer_from_opt),
    Patch("adam_fused_resume", "adam_fused holds after a resumed optimizer state is loaded",
          "onmt.utils.optimizers:Optimizer.from_opt", adam_fused.wrap_optimizer_from_opt),
    Patch("resume_state_save", "the learning-rate halvings, the last validation loss and the early-stopping "
          "counts go into the checkpoint (with the optimizer's state)",
          "onmt.utils.optimizers:Optimizer.state_dict", wrap_state_dict),
    Patch("resume_state_load", "-train_from resumes at the halved learning rate and keeps that state",
          "onmt.utils.optimizers:Optimizer.load_state_dict", wrap_load_state_dict),
    Patch("optimizer_state_finite", "train_from: a saved optimizer state with a NaN or inf is refused before "
          "it loads (the first resumed step would make the weights NaN)",
          "onmt.utils.optimizers:Optimizer.load_state_dict",
          lambda up: optimizer_state.wrap_load_state_dict(up, CheckpointError)),
    Patch("early_stopping_resume", "a resumed run's early stopper continues the checkpoint's best scores and "
          "patience (upstream starts both afresh)", "onmt.trainer:build_trainer",
          lambda up: early_stopping.wrap_build_trainer(up, lambda: logging.getLogger("onmt")),
          aliases=("onmt.train_single:build_trainer",)),
    Patch("rnn_cuda_graphs_trainer", "with rnn_cuda_graphs the trainer's input-feed decoder gets its graphs",
          "onmt.trainer:build_trainer", cuda_graphs.wrap_build_trainer),
    Patch("rnn_cuda_graphs_forward", "rnn_cuda_graphs: the input-feed decoder's training steps replay CUDA graphs",
          "onmt.decoders.decoder:InputFeedRNNDecoder._run_forward_pass", lambda up: graphed_loop(up, "src_len")),
    Patch("valid_lr_halving", "halve the learning rate when the validation loss rises",
          "onmt.trainer:Trainer.validate", lr_halving.wrap_validate),
    Patch("shuffle_each_pass_seed", "a training data iterator built with shuffle_each_pass carries the run's seed",
          "onmt.inputters.dynamic_iterator:DynamicDatasetIter.from_opt", data_order.wrap_from_opt),
    Patch("shuffle_each_pass", "with it, every pass over a training corpus is read in a new random order",
          "onmt.inputters.dynamic_iterator:DynamicDatasetIter._init_datasets",
          lambda up: wrap_init_datasets(up, "onmt")),
    Patch("valid_batches_once", "the validation corpus is read and batched once, its batches replayed at every "
          "later validation (upstream reads, transforms and batches it again each time)",
          "onmt.inputters.dynamic_iterator:build_dynamic_dataset_iter",
          valid_batches.wrap_build_dynamic_dataset_iter, aliases=("onmt.train_single:build_dynamic_dataset_iter",)),
    Patch("training_host", "the training loop runs backward on the calling thread, not autograd's device "
          "thread (faster host-bound steps; ONMT_ENTMAX_TRAIN_HOST=as-is keeps upstream's)",
          "onmt.trainer:Trainer.train", backward_on_calling_thread),
    Patch("stop_on_signal", "SIGTERM / Ctrl-C while one process trains: finish the step, save its checkpoint, "
          "exit 128 + the signal (upstream dies and loses the steps since the last save)",
          "onmt.train_single:main", lambda up: stop_on_signal(up, lambda opt, *a, **k: opt.world_size <= 1),
          aliases=("onmt.bin.train:single_main",)),
    Patch("stop_between_steps", "once a stop is asked, the training loop gets no further batch",
          "onmt.trainer:Trainer._accum_batches", lambda up: stop_between_steps(up, "onmt")),
    Patch("checkpoint_weights_only", "every checkpoint upstream loads (onmt_translate, -train_from, "
          "onmt_average_models, onmt_release_model) is read weights-only, whatever torch's default; every "
          "one they save is written whole or not at all (temporary file, then renamed; a full disk in one line); "
          "a file read that is no checkpoint or holds a NaN / inf weight is refused naming it",
          apply=checkpoint.install_weights_only_loading,
          rebinds=("onmt.models.model_saver:torch", "onmt.bin.average_models:torch", "onmt.bin.release_model:torch")),
    Patch("average_same_options", "onmt_average_models refuses checkpoints with different Entmax options, "
          "parameters (names, shapes) or vocabularies, as each loads", "onmt.bin.average_models:average_models",
          checkpoint.wrap_average_models),
    Patch("average_output", "onmt_average_models refuses an -output that is one of its -models",
          "onmt.bin.average_models:main", checkpoint.wrap_average_main),
    Patch("one_line_refusals", "a refusal (ValueError subclass) ending a command prints one line, no traceback",
          apply=errors.install_excepthook, rebinds=("sys:excepthook",)),
    Patch("decoding_options", "the sparse-decoding options (certificate, analyses, report), translate only",
          "onmt.opts:translate_opts", lambda up: _decoding("translator")._translate_opts(up),
          aliases=("onmt.bin.translate:translate_opts",)),
    Patch("decoding_config", "a translator resolves its decoding options against the checkpoint (bad ones fail "
          "before decoding) and warms the kernels of its model", "onmt.translate.translator:Inference.from_opt",
          lambda up: _decoding("translator")._from_opt(up)),
    Patch("decoding_records", "certificate tracker per beam; per-sentence records and analyses",
          "onmt.translate.translator:Translator._translate_batch_with_strategy",
          lambda up: _decoding("translator")._translate_batch_with_strategy(up)),
    Patch("decoding_report", "records in input order, JSON lines, heatmap and summary per file",
          "onmt.translate.translator:Inference._translate", lambda up: _decoding("translator")._translate(up)),
    Patch("decoding_n_best", "fewer than n_best hypotheses when fewer have nonzero probability",
          "onmt.translate.translation:TranslationBuilder.from_batch",
          lambda up: _decoding("translator")._from_batch(up)),
    Patch("beam_attention_layout", "an input-feed RNN decoder's time-first step attention turned batch-first "
          "(-attn_debug, -replace_unk and coverage index the right axis)",
          "onmt.translate.beam_search:BeamSearchBase.advance", lambda up: _decoding("translator")._advance(up)),
    *(Patch(name, why, target, wrapper) for name, why, target, wrapper in beam.ROWS),
    Patch("ensemble_average", "log((1/M) sum_m p_m) with each member's own mapping, -inf where all give 0",
          "onmt.decoders.ensemble:EnsembleGenerator.forward", lambda up: _decoding("ensemble")._ensemble_forward(up)),
    Patch("ensemble_members", "an ensemble's members share their vocabularies and attention layout (refused as "
          "they load); with a sparse member (or -avg_raw_probs) its generator averages raw probabilities",
          "onmt.decoders.ensemble:load_test_model", lambda up: _decoding("ensemble")._load_test_model(up)),
    Patch("alpha_csv", "learned alpha per head and layer to <save_model>_alphas.csv at every report step", "onmt.trainer:Trainer._maybe_report_training", lambda up: importlib.import_module("onmt_entmax.onmt.training.alpha_log").wrap_maybe_report_training(up)),  # noqa: E501
]

# the rows of the sparse beam search, certificates, analyses and raw-probability ensembles (docs/decoding.md)
SPARSE_DECODING = ("decoding_options", "decoding_config", "decoding_records", "decoding_report", "decoding_n_best",
                   "beam_attention_layout", *(name for name, *_ in beam.ROWS), "ensemble_average", "ensemble_members")

_SET = PatchSet(PATCHES)
# apply_patches(patches=None) -> names applied (idempotent); applied(); original(name): the upstream object
apply_patches, applied, original = _SET.apply, _SET.applied, _SET.original
