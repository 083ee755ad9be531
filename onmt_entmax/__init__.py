"""onmt-entmax: sparse transformations (sparsemax, entmax, alpha-ReLU) for OpenNMT-py.

Importing this package does not import OpenNMT-py; the integration lives in `onmt_entmax.onmt`.
"""
from .ops import *  # noqa: F401,F403 (the public math API)
from .ops import __all__  # noqa: F401 (re-exported: the public math API's names)

__version__ = "0.1.0"
