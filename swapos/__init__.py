"""SwapOS: a pipeline-aware runtime for multi-model local LLM pipelines.

The public API is exactly what this module re-exports.
"""

from __future__ import annotations

__version__ = "0.1.0"
