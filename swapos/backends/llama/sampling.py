"""Choosing the next token from one row of logits: greedy, or temperature with top-k/top-p.

One function for every decode loop, so a draw decoded side by side
(:mod:`~swapos.backends.llama.parallel`) samples exactly as the same draw decoded in turn
(:mod:`~swapos.backends.llama.decode`): the same logits and the same ``rng`` state give the
same token.
"""

from __future__ import annotations

import numpy as np

from swapos.data.sampling import SamplingParams


def sample_logits(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """The token ``params`` picks from ``logits`` (one row, ``n_vocab`` floats).

    Greedy (argmax) at temperature 0, with no draw from ``rng``; otherwise the logits are
    scaled by the temperature, cut to the ``top_k`` best, then to the smallest set whose
    probability reaches ``top_p``, and one token is drawn from ``rng``.
    """
    if params.temperature <= 0.0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / params.temperature
    k = params.top_k if 0 < params.top_k < scaled.size else scaled.size
    ids = np.argpartition(-scaled, k - 1)[:k] if k < scaled.size else np.arange(scaled.size)
    ids = ids[np.argsort(-scaled[ids])]
    probs = np.exp(scaled[ids] - scaled[ids[0]])
    probs /= probs.sum()
    if params.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(probs), params.top_p)) + 1
        ids, probs = ids[:keep], probs[:keep] / probs[:keep].sum()
    return int(ids[rng.choice(len(ids), p=probs)])
