"""Analyses of sparse seq2seq models: forced-decoding supports, empty-string check,
sparsity statistics, attention heatmaps, JSON-lines reports. Pure functions over tensors."""
from .empty import empty_beats_beam, empty_rate
from .forced import StepSupport, format_support_sets, suggestions, support_sets
from .heatmap import attention_heatmap, outlined_cells
from .report import format_summary, read_jsonl, summarize, write_jsonl
from .sparsity import SparsityStats, attended, output_support, probability_sums

__all__ = [
    "SparsityStats", "StepSupport", "attended", "attention_heatmap", "empty_beats_beam", "empty_rate",
    "format_summary", "format_support_sets", "outlined_cells", "output_support", "probability_sums",
    "read_jsonl", "summarize", "suggestions", "support_sets", "write_jsonl",
]
