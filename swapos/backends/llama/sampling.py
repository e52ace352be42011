"""Choosing the next token from one row of logits: greedy, or temperature with top-k/top-p.

One function for every decode loop, so a draw decoded side by side
(:mod:`~swapos.backends.llama.parallel`) samples exactly as the same draw decoded in turn
(:mod:`~swapos.backends.llama.decode`): the same logits and the same ``rng`` state give the
same token.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from swapos.data.sampling import SamplingParams


def adjust_logits(
    logits: np.ndarray, params: SamplingParams, history: Sequence[int] = ()
) -> np.ndarray:
    """``logits`` with ``params.logit_bias`` added and the repetition penalties applied
    over the last ``repeat_last_n`` tokens of ``history`` (as llama.cpp's penalties
    sampler: a repeated token's positive logit is divided by ``repeat_penalty``, a
    negative one multiplied; then ``frequency_penalty`` per occurrence and
    ``presence_penalty`` once are subtracted). ``logits`` itself when nothing applies,
    else a copy.
    """
    if not params.adjusts_logits:
        return logits
    out = logits.astype(np.float32, copy=True)
    for token, bias in params.logit_bias:
        if 0 <= token < out.size:
            out[token] += bias
    n = params.repeat_last_n
    window = history if n < 0 else history[-n:] if n else ()
    if window:
        ids, counts = np.unique(np.asarray(window, dtype=np.int64), return_counts=True)
        keep = ids < out.size
        ids, counts = ids[keep], counts[keep]
        seen = out[ids]
        penalty = params.repeat_penalty
        seen = np.where(seen > 0, seen / penalty, seen * penalty)
        seen -= counts * params.frequency_penalty + params.presence_penalty
        out[ids] = seen
    return out


def sample_logits(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """The token ``params`` picks from ``logits`` (one row, ``n_vocab`` floats).

    Greedy (argmax) at temperature 0, with no draw from ``rng``; otherwise the logits are
    scaled by the temperature, cut to the ``top_k`` best, then to the smallest set whose
    probability reaches ``top_p``, then to those at least ``min_p`` times as likely as the
    likeliest, and one token is drawn from ``rng``.
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
    if params.min_p > 0.0:
        keep = max(1, int(np.count_nonzero(probs >= params.min_p * probs[0])))
        ids, probs = ids[:keep], probs[:keep] / probs[:keep].sum()
    return int(ids[rng.choice(len(ids), p=probs)])
