"""How to sample one generation (plain data shared by messages, backends and the pipeline)."""

from __future__ import annotations

import msgspec

from swapos.data.generation import DraftRequest


class SamplingParams(msgspec.Struct, frozen=True, kw_only=True):
    """How to sample one generation.

    Attributes:
        max_tokens: hard cap on generated tokens (``hit_cap`` when reached).
        stop: stop sequences; the text ends *before* the first one found.
        temperature: 0 means greedy.
        seed: sampling seed (used when ``temperature > 0``).
        top_k: top-k filter; 0 disables it.
        top_p: nucleus filter; 1.0 disables it.
        draft: what the decode loop may draft from and for which phase kind; None: the
            prompt and the answer only, the policy's default acceptance.
    """

    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    temperature: float = 0.0
    seed: int = 0
    top_k: int = 40
    top_p: float = 0.95
    draft: DraftRequest | None = None
