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
        draft_rule: the drafting rule the decode loop used (``"lookup1-3"``, with
            ``"+prediction"`` when the request gave a predicted output); empty when it did
            not draft (no measured batch cost, or drafting would not pay).
        drafted_tokens: drafted tokens sent for verification (in ``verify_steps`` batches).
        accepted_tokens: drafted tokens the model accepted (part of ``tokens``).
        verify_steps: decode steps that verified a draft (each also yields the model's own
            next token); the other ``tokens - accepted_tokens - verify_steps`` tokens were
            decoded one per step.
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
    draft_rule: str = ""
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_steps: int = 0

    @property
    def hit_cap(self) -> bool:
        """True when generation stopped because it reached ``max_tokens``."""
        return self.stop_reason == "length"


class DraftRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a generation tells the decode loop about drafting (part of its sampling data).

    Attributes:
        kind: the phase kind (``"reason"``, ``"code"``, ``"fix"``, ``"critic"``, ``"serve"``):
            the acceptance measured for that kind is the policy's starting estimate.
        prediction: text the answer is expected to repeat (OpenAI's predicted outputs, a
            file being rewritten): drafts are looked up in it before the prompt.
        max_draft: pins the draft length (tokens verified per step whenever a draft is
            found; 0 never drafts); None lets the policy choose from the measured costs.
        model_draft: pins the length of the drafts a smaller resident model with the same
            vocabulary proposes when the lookup finds none (0 never drafts from a model);
            None lets ``policies/model_drafts.py`` choose from both models' measured costs.
    """

    kind: str = ""
    prediction: str = ""
    max_draft: int | None = None
    model_draft: int | None = None


class DraftCosts(msgspec.Struct, frozen=True, kw_only=True):
    """What drafting costs and yields on one model and machine (``bench decode`` writes it;
    a profile may pin a file of it).

    Attributes:
        verify_ratio: entry ``i`` is the wall of one decode batch of ``i + 1`` tokens with
            logits at every position, over the wall of a batch of one token (entry 0 is 1.0);
            the longest draft verified is ``len(verify_ratio) - 1``.
        acceptance: per phase kind, the probability that a drafted token is accepted given
            the ones before it were (replayed on recorded outputs); kinds absent here use
            ``default_acceptance``.
        default_acceptance: the acceptance of a phase kind not measured.
        ngram_min: shortest n-gram match a draft is looked up from.
        ngram_max: longest n-gram match tried (first).
        source: where these numbers come from (a file, "pinned"...), for the logs.
        step_s: the wall of one plain decode step (one token), seconds; 0: not measured
            (costs saved before it was), and the model then neither drafts for another
            nor is drafted for by one.
        prefill_s_per_token: prefill wall per prompt token, seconds (0: not measured).
    """

    verify_ratio: tuple[float, ...]
    acceptance: dict[str, float] = {}
    default_acceptance: float = 0.0
    ngram_min: int = 1
    ngram_max: int = 3
    source: str = ""
    step_s: float = 0.0
    prefill_s_per_token: float = 0.0
