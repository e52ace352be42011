"""The numbers of one generation, defined once.

The backend returns them (:class:`~swapos.backends.base.GenerationOutput`), the Generator
replies with them (:class:`~swapos.messages.commands.Generated`) and logs them
(:class:`~swapos.messages.events.GenerationFinished`): the same struct each time, never
copied field by field.
"""

from __future__ import annotations

from typing import Literal

import msgspec

StopReason = Literal["stop", "eos", "length", "context"]
"""Why a generation ended: a stop sequence, an end-of-generation token, ``max_tokens``, or a
full context."""


class GenerationStats(msgspec.Struct, frozen=True, kw_only=True):
    """What one generation cost and why it ended (seconds on the backend's clock).

    Attributes:
        prompt_tokens: tokens in the prompt.
        prefill_tokens: prompt tokens evaluated (``prompt_tokens - kv_restored_tokens``).
        kv_restored_tokens: prompt tokens that came from a restored KV state.
        prefill_s: time spent restoring and prefilling.
        ttft_s: from the call to the first generated token (prefill included).
        tokens: generated tokens.
        gen_s: decode time after the first token.
        stop_reason: why generation ended.
        kv_servable_tokens: prompt tokens the same model had already read earlier in the
            same task (the longest common prefix with an earlier phase's prompt and answer):
            what a perfect prefix cache could have restored. Set by the Generator (0 from the
            backend); the share of these that were restored is the KV cache's score.
    """

    prompt_tokens: int
    prefill_tokens: int
    kv_restored_tokens: int
    prefill_s: float
    ttft_s: float
    tokens: int
    gen_s: float
    stop_reason: StopReason
    kv_servable_tokens: int = 0

    @property
    def hit_cap(self) -> bool:
        """True when generation stopped because it reached ``max_tokens``."""
        return self.stop_reason == "length"
