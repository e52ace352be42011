"""The llama.cpp objects a generation runs on, and reading a row of logits."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np

from swapos.backends.llama.model_draft import ModelDrafter
from swapos.data.generation import DraftCosts


@dataclasses.dataclass(frozen=True)
class Handles:
    """The llama.cpp objects (and their sizes) a generation runs on."""

    name: str
    model: Any
    ctx: Any
    vocab: Any
    n_vocab: int
    n_ctx: int
    n_batch: int
    window: int | None = None
    """The sliding attention window (``n_swa``), None with full attention."""
    draft_costs: DraftCosts | None = None
    """The model's measured drafting costs (None: never draft unless a request pins it)."""
    drafter: ModelDrafter | None = None
    """A smaller resident model that drafts where the lookup finds nothing (None: none)."""
    seq: int | None = None
    """The generation's sequence: None for a model's own context (its one sequence, 0,
    cleared whole), a slot's sequence in a context with slots."""
    beside: Callable[[], int] | None = None
    """How many other generations share the context now (slots): a step drafts only
    when none does (a verification batch beside other sequences' tokens costs them)."""


def logits_row(ctx: Any, n_vocab: int, row: int = -1) -> np.ndarray:
    """The logits of output ``row`` of the last batch (-1: its last), as a view."""
    ptr = llama_cpp.llama_get_logits_ith(ctx, row)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,))
