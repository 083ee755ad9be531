"""Every change this adapter makes to Eole (tested: 0.6.4), in one list, applied by ``apply_patches()``.

A ``Patch`` (``onmt_entmax.patching``) either wraps one upstream attribute, calling the upstream
object so no upstream code is copied, or runs a registration function. ``apply_patches`` is
idempotent; each wrapped object keeps the upstream one as ``__wrapped__`` and ``original(name)``
returns it. docs/eole.md explains each entry.
"""
from __future__ import annotations

from onmt_entmax.decoding.log_probs_hook import make_log_softmax, wrap_decode_and_generate
from onmt_entmax.errors import ConfigError
from onmt_entmax.patching import Patch, PatchSet
from onmt_entmax.training import early_stopping, optimizer_state
from onmt_entmax.training.cuda_graphs import graphed_loop
from onmt_entmax.training.data_order import wrap_init_datasets
from onmt_entmax.training.host import backward_on_calling_thread
from onmt_entmax.training.resume_state import wrap_load_state_dict, wrap_state_dict
from onmt_entmax.training.signals import stop_between_steps, stop_on_signal

from . import files, options, upstream_noise, validation
from .decoding import beam, ensemble, translator
from .errors import install_one_line_hook
from .model import attention, building, loading
from .training import (
    adam_fused,
    cuda_graphs,
    data_order,
    loss,
    lr_halving,
    reporting,
    resume_state,
    saving,
    valid_batches,
)

MHA = "eole.modules.multi_headed_attn"
BUILD_CONFIG = "eole.bin.run:RunBin.build_config"


def _config_check(check):
    """The wrapper of a row of ``BUILD_CONFIG`` over ``config_checks``: what ran before, then ``check(config)``."""
    return lambda up: validation.wrap_config_check(up, check)


PATCHES: list[Patch] = [
    Patch("upstream_noise", "upstream's import-time and config warnings (at their source), the 1-layer LSTM's "
          "dropout warning and repeated corpus lines filtered", apply=upstream_noise.quiet,
          extends=("warnings:filters", "eole.utils.logging:logger.filters")),
    Patch("config_fields", "our model options in every model config, decoding options in PredictConfig, "
          "shuffle_each_pass, rnn_cuda_graphs, valid_lr_halving(_every) and adam_fused in TrainingConfig",
          apply=options.extend_configs,  # (each class and its subclasses; then the schemas embedding them rebuilt)
          extends=("eole.config.models:BaseModelConfig.__pydantic_fields__",
                   "eole.config.models:DecoderConfig.__pydantic_fields__",
                   "eole.config.training:TrainingConfig.__pydantic_fields__",
                   "eole.config.run:PredictConfig.__pydantic_fields__")),
    # the checks of the config a command builds, one row a feature: each runs after the rows above it, so the first
    # refusal in table order is the one given
    Patch("config_checks", "config errors as one line naming the option; the model's cross-option checks",
          BUILD_CONFIG, validation.wrap_build_config, deferred=True),
    Patch("rnn_cuda_graphs_config", "training.rnn_cuda_graphs needs what its graphs replay", BUILD_CONFIG,
          _config_check(cuda_graphs.check), deferred=True),
    Patch("valid_lr_halving_config", "training.valid_lr_halving needs validation data and no other schedule",
          BUILD_CONFIG, _config_check(lr_halving.check), deferred=True),
    Patch("adam_fused_config", "training.adam_fused needs an Adam optimizer", BUILD_CONFIG,
          _config_check(adam_fused.check), deferred=True),
    Patch("command_config_checks", "eole predict: its files and decoding options against the model; eole train, "
          "build_vocab: the training checks of onmt_train and the run's files", BUILD_CONFIG,
          _config_check(validation.check_command_config), deferred=True),
    Patch("one_line_errors", "our refusals print one line, not a traceback", apply=install_one_line_hook,
          rebinds=("sys:excepthook",)),
    Patch("build_model", "our generator and attention normalizers, before weights load; flash KV cache off "
          "for sparse decoder self-attention", "eole.models.model:BaseModel.build", building.wrap_build),
    Patch("init_weights", "learnable alphas start at the configured alpha, not param_init noise",
          "eole.models.model:BaseModel.init_weights", building.wrap_init_weights),
    Patch("rl_log_probs", "RL training's log_softmax of the logits is refused for a sparse output layer",
          "eole.models.model:BaseModel.compute_log_probs", building.wrap_compute_log_probs),
    Patch("model_folder_files", "every model folder loaded (predict, ensemble members, train_from): config.json, "
          "vocab.json and model.*.safetensors there and readable, else one line naming the file",
          "eole.models.model_saver:get_metadata", loading.wrap_get_metadata,
          aliases=("eole.models.model:get_metadata", "eole.train_single:get_metadata",
                   "eole.decoders.ensemble:get_metadata")),
    Patch("model_folder_config", "eole predict: the first model folder's config.json checked (naming the file) "
          "before PredictConfig's validator reads it", "eole.config.run:PredictConfig.__init__",
          loading.wrap_predict_config_init),
    Patch("finite_weights", "a loaded model's weights (learned alphas included) all finite, else one line naming "
          "the weight and its file", "eole.models.model:BaseModel.load_safe_state_dict",
          loading.wrap_load_safe_state_dict),
    Patch("attention_compute", "while a sparse attention module runs, both of its branches use its normalizer",
          f"{MHA}:MultiHeadedAttention._compute_attention", attention.wrap_compute_attention),
    Patch("attention_eager", "the eager branch's F.softmax is the module's normalizer",
          apply=attention.install_functional, rebinds=(f"{MHA}:F",)),
    Patch("attention_sdpa", "the SDPA branch (CUDA) runs the module's normalizer in one call",
          f"{MHA}:_sdpa", attention.make_sdpa),
    Patch("rnn_attention_check", "GlobalAttention accepts every registered attention normalizer",
          "eole.modules.global_attention:GlobalAttention._validate_params", attention.wrap_validate_params),
    Patch("rnn_attention_normalize", "RNN global attention runs our normalizer (-inf masks: exact zeros)",
          "eole.modules.global_attention:GlobalAttention._normalize_attention", attention.wrap_normalize_attention),
    Patch("training_host", "the training loop runs backward on the calling thread, not autograd's device "
          "thread (ONMT_ENTMAX_TRAIN_HOST=as-is keeps upstream's)", "eole.trainer:Trainer.train",
          backward_on_calling_thread),
    Patch("stop_on_signal", "SIGTERM / Ctrl-C while one process trains: finish the step, save its checkpoint, "
          "exit 128 + the signal (upstream dies and loses the steps since the last save)",
          "eole.train_single:main",
          lambda up: stop_on_signal(up, lambda config, *a, **k: config.training.world_size <= 1),
          aliases=("eole.bin.run.train:single_main",)),
    Patch("stop_between_steps", "once a stop is asked, the training loop gets no further batch",
          "eole.trainer:Trainer._accum_batches", lambda up: stop_between_steps(up, "eole")),
    Patch("one_run_per_model_path", "training.model_path never holds another run's step_N/ (unless train_from "
          "resumes it), checked before the first step", "eole.models.model_saver:build_model_saver",
          files.wrap_build_model_saver, aliases=("eole.train_single:build_model_saver",)),
    Patch("atomic_checkpoints", "a checkpoint folder (step_N/ and the links beside it) is written in a staging "
          "folder and renamed into place whole; a full disk ends the run in one line",
          "eole.models.model_saver:TrainingModelSaver._save", saving.wrap_save),
    Patch("atomic_torch_save", "the saver's torch.save writes a temporary file and renames it (a full disk says so)",
          apply=saving.install_atomic_torch_save, rebinds=("eole.models.model_saver:torch",)),
    Patch("loss_criterion", "Fenchel-Young criterion of the model's generator (upstream sparsemax crashes)",
          "eole.utils.loss:LossCompute.from_config", loss.wrap_from_config),
    Patch("shuffle_each_pass_seed", "a training data iterator of a run with shuffle_each_pass carries the run's seed",
          "eole.inputters.dynamic_iterator:DynamicDatasetIter.from_config", data_order.wrap_dataset_from_config),
    Patch("shuffle_each_pass", "with it, every pass over a training corpus is read in a new random order",
          "eole.inputters.dynamic_iterator:DynamicDatasetIter._init_datasets",
          lambda up: wrap_init_datasets(up, "eole")),
    Patch("early_stopping_resume", "a resumed run's early stopper continues the checkpoint's best scores and "
          "patience", "eole.trainer:build_trainer",
          lambda up: early_stopping.wrap_build_trainer(up, loss.eole_logger),
          aliases=("eole.train_single:build_trainer",)),
    Patch("rnn_cuda_graphs_trainer", "training.rnn_cuda_graphs: the model's input-feed RNN decoder gets its graphs",
          "eole.trainer:build_trainer", cuda_graphs.wrap_build_trainer),
    Patch("rnn_cuda_graphs_forward", "training.rnn_cuda_graphs: the input-feed decoder's training steps replay "
          "CUDA graphs", "eole.decoders.rnn_decoder:InputFeedRNNDecoder._run_forward_pass",
          lambda up: graphed_loop(up, "src_pad_mask")),
    Patch("valid_batches_once", "the validation corpus is read and batched once, its batches replayed at every "
          "later validation", "eole.inputters.dynamic_iterator:build_dynamic_dataset_iter",
          valid_batches.wrap_build_dynamic_dataset_iter, aliases=("eole.train_single:build_dynamic_dataset_iter",)),
    Patch("valid_lr_halving_flag", "training.valid_lr_halving: the optimizer remembers whether to halve, and has "
          "no step decay then", "eole.utils.optimizers:Optimizer.from_config", lr_halving.wrap_from_config),
    Patch("adam_fused", "training.adam_fused: Adam fused, also after a train_from state is loaded",
          "eole.utils.optimizers:Optimizer.from_config", adam_fused.wrap_from_config),
    Patch("valid_lr_halving", "halve the learning rate when the validation loss rises",
          "eole.trainer:Trainer.validate", lr_halving.wrap_validate),
    Patch("resume_state_save", "the learning-rate halvings, the last validation loss and the early-stopping "
          "state are saved with the optimizer (optimizer.pt)",
          "eole.utils.optimizers:Optimizer.state_dict", wrap_state_dict),
    Patch("resume_state_counters", "a state without step counters (reset_optim keep_states) loads instead of "
          "a KeyError", "eole.utils.optimizers:Optimizer.load_state_dict", resume_state.wrap_load_counters),
    Patch("resume_state_load", "train_from resumes at the halved learning rate and keeps that state",
          "eole.utils.optimizers:Optimizer.load_state_dict", wrap_load_state_dict),
    Patch("optimizer_state_finite", "train_from: a saved optimizer state with a NaN or inf is refused before "
          "it loads (the first resumed step would make the weights NaN)",
          "eole.utils.optimizers:Optimizer.load_state_dict",
          lambda up: optimizer_state.wrap_load_state_dict(up, ConfigError)),
    Patch("loss_forward", "resolve generator_tau auto on the first batch; attended source tokens",
          "eole.utils.loss:LossCompute.forward", loss.wrap_forward),
    Patch("loss_stats", "name the loss; nonzero output probabilities per token",
          "eole.utils.loss:LossCompute._stats", loss.wrap_stats),
    Patch("stats_update", "accumulate the sparsity sums across batches and GPUs",
          "eole.utils.statistics:Statistics.update", reporting.wrap_update),
    Patch("stats_output", "the FY loss by its name instead of ppl / xent; sparsity; learned alphas",
          "eole.utils.statistics:Statistics.output", reporting.wrap_output),
    Patch("report_step", "no 'perplexity' lines for a FY loss",
          "eole.utils.report_manager:StdoutReportMgr._report_step", reporting.wrap_report_step),
    Patch("predict_generator", "decoding sees which generator is running",
          "eole.predict.inference:Inference._decode_and_generate", wrap_decode_and_generate),
    Patch("predict_log_probs", "log of the model's own probabilities (-inf for zeros) instead of log_softmax",
          "eole.predict.inference:log_softmax", make_log_softmax),
    *(Patch(name, why, target, wrapper) for name, why, target, wrapper in beam.ROWS),
    Patch("ensemble_members", "an ensemble's members share their vocabularies; with a sparse member (or "
          "avg_raw_probs) its generator averages raw probabilities",
          "eole.decoders.ensemble:EnsembleModel.for_inference", ensemble.wrap_for_inference),
    Patch("ensemble_init_cache", "an ensemble's members set up their KV caches (upstream: a no-op, and its "
          "Transformer members fail at the first step)",
          "eole.decoders.ensemble:EnsembleDecoder._init_cache", ensemble.init_members_cache),
    Patch("ensemble_extend_cache", "an ensemble's members extend their KV caches",
          "eole.decoders.ensemble:EnsembleDecoder._extend_cache", ensemble.extend_members_cache),
    Patch("ensemble_disable_cache", "an ensemble's members drop their KV caches",
          "eole.decoders.ensemble:EnsembleDecoder._disable_cache", ensemble.disable_members_cache),
    Patch("ensemble_average", "log((1/M) sum_m p_m) with each member's own mapping, -inf where all give 0",
          "eole.decoders.ensemble:EnsembleGenerator.forward", ensemble.wrap_generator_forward),
    Patch("predict_options", "decoding options checked against the model (-src lines and -max_length within "
          "its position table); kernels' set-up at model load",
          "eole.predict.inference:Inference.__init__", translator.wrap_inference_init),
    Patch("predict_records", "certificate tracker per beam; per-sentence records and analyses",
          "eole.predict.translator:Translator._predict_batch_with_strategy",
          translator.wrap_predict_batch_with_strategy),
    Patch("predict_report", "records in input order, JSON lines, heatmap and summary per file",
          "eole.predict.inference:Inference._predict", translator.wrap_predict),
    Patch("predict_empty_support", "a sentence without any nonzero-probability hypothesis gets a placeholder",
          "eole.predict.inference:Inference.report_results", translator.wrap_report_results),
    Patch("predict_n_best", "fewer than n_best hypotheses when fewer have nonzero probability",
          "eole.predict.prediction:PredictionBuilder.from_batch", translator.from_batch),
]

_SET = PatchSet(PATCHES)
# apply_patches(patches=None) -> names applied (idempotent); applied(); original(name): the upstream object
apply_patches, applied, original = _SET.apply, _SET.applied, _SET.original
