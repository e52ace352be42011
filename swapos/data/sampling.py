"""How to sample one generation (plain data shared by messages, backends and the pipeline)."""

from __future__ import annotations

import msgspec

from swapos.data.constraint import Constraint
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
        min_p: drop tokens less likely than ``min_p`` times the likeliest (0 disables it).
        repeat_penalty: divide (a positive logit) or multiply (a negative one) by this the
            logits of tokens among the last ``repeat_last_n`` (1.0 disables it).
        repeat_last_n: how many of the last tokens (prompt and answer) the penalties count.
        presence_penalty: subtract this from the logit of a token that occurs among them.
        frequency_penalty: subtract this times its count there.
        logit_bias: ``(token id, bias)`` pairs added to the logits before sampling.
        constraint: a grammar the text must follow (JSON, a schema, a tool call); None:
            free text. A constrained generation does not draft.
    """

    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    temperature: float = 0.0
    seed: int = 0
    top_k: int = 40
    top_p: float = 0.95
    draft: DraftRequest | None = None
    min_p: float = 0.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    constraint: Constraint | None = None

    @property
    def adjusts_logits(self) -> bool:
        """The logits change before sampling (a bias or a repetition penalty)."""
        return bool(self.logit_bias) or (
            self.repeat_last_n != 0
            and (
                self.repeat_penalty != 1.0
                or self.presence_penalty != 0.0
                or self.frequency_penalty != 0.0
            )
        )
