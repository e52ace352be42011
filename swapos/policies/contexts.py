"""How big a model's context is: sized by what its requests need, up to its cap.

A model has three context numbers (``swapos/models/spec.py``):

- its *start*: the context it is loaded with when no request asks for more (the profile's
  ``n_ctx_start``; by default the smaller of its cap and 4096:
  ``swapos/models/model_config.py``);
- its *cap*: the most it may ever be loaded with (the profile's ``n_ctx``, bounded by the
  length the model was trained for, read from its GGUF header);
- the context it is *loaded* with now (none while it is not loaded).

A request *needs* ``prompt_tokens`` plus the tokens it asks to generate, or Ollama's
``options.num_ctx`` when that is more (:func:`needed_context`). :func:`context_step` decides,
in this order (its tests mirror the rows):

==========================================  ==============================================
when                                        step
==========================================  ==============================================
the prompt alone fills the cap              :class:`Refuse` (the prompt's tokens, the cap)
loaded, and the loaded context >= the need  :class:`Fits`
   (the need first bounded by the cap)
not loaded                                  :class:`LoadWith` the grown need, at least the
                                            start, ``reload=False``
loaded with less than the need              :class:`LoadWith` the grown need,
                                            ``reload=True``
==========================================  ==============================================

The *grown* need is the need rounded up to a power of two, never above the cap
(:func:`grown`): a conversation that grows token by token reloads its model a handful of
times (4k, 8k, 16k, 32k), not once per turn. Where the budget can hold the need but not its
power of two (the 1.5B's 16384 tokens under the default budget, say), the model is loaded
with the need itself, or its start if that is more (:func:`within_budget`). A request that
needs less than the model is loaded with never shrinks it: the context stays as it is until
the model is evicted, and the next load starts again from what its first request needs.

Pure and synchronous; the server refuses with it, the Loader loads and reloads with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec


class Fits(msgspec.Struct, frozen=True, kw_only=True, tag="fits"):
    """The loaded context holds the request: use it as it is."""

    n_ctx: int


class LoadWith(msgspec.Struct, frozen=True, kw_only=True, tag="load"):
    """Load the model with a context of ``n_ctx`` tokens; ``reload``: it is loaded with a
    smaller one now, which must go first (a swap like any other)."""

    n_ctx: int
    reload: bool


class Refuse(msgspec.Struct, frozen=True, kw_only=True, tag="refuse"):
    """The prompt alone takes ``prompt_tokens`` of a model that can hold ``most`` at most."""

    prompt_tokens: int
    most: int


ContextStep = Fits | LoadWith | Refuse
StepKind = Literal["fits", "load", "refuse"]


def needed_context(prompt_tokens: int, answer_tokens: int, num_ctx: int | None = None) -> int:
    """The context a request needs: its prompt and the answer it asks for, or ``num_ctx``
    (Ollama's ``options.num_ctx``, the context the client wants) when that is more."""
    return max(prompt_tokens + max(answer_tokens, 0), num_ctx or 0)


def grown(need: int, *, cap: int) -> int:
    """``need`` rounded up to a power of two, at most ``cap``."""
    if need <= 1:
        return min(1, cap)
    return min(cap, 1 << (need - 1).bit_length())


def context_step(
    need: int, *, prompt_tokens: int = 0, loaded: int | None, start: int, cap: int
) -> ContextStep:
    """What to do for a request that needs ``need`` tokens of context (see the module's
    table): fits, load (or reload) with a context of N tokens, or refuse.

    Args:
        need: the request's :func:`needed_context`.
        prompt_tokens: its prompt's tokens (0 where the caller checked them already: the
            Loader, after the server refused what the cap cannot hold).
        loaded: the context the model is loaded with now; None: it is not loaded.
        start: the model's start context (at most ``cap``).
        cap: the most the model may be loaded with.
    """
    if prompt_tokens >= cap:
        return Refuse(prompt_tokens=prompt_tokens, most=cap)
    want = min(need, cap)
    if loaded is not None and loaded >= want:
        return Fits(n_ctx=loaded)
    size = grown(want, cap=cap)
    if loaded is None:
        return LoadWith(n_ctx=max(size, min(start, cap)), reload=False)
    return LoadWith(n_ctx=max(size, loaded), reload=True)


def within_budget(
    step: LoadWith, need: int, *, start: int, fits: Callable[[int], bool]
) -> LoadWith:
    """``step``, or the smallest context that holds ``need`` when the budget cannot hold
    ``step``'s grown one but can hold that: ``need``, at least ``start``.

    Args:
        step: what :func:`context_step` chose.
        need: the request's need, bounded by the cap.
        start: the model's start context.
        fits: whether the model loaded with a context of N tokens fits its budget.
    """
    smaller = max(need, start)
    if smaller >= step.n_ctx or fits(step.n_ctx) or not fits(smaller):
        return step
    return LoadWith(n_ctx=smaller, reload=step.reload)


def refusal_text(refused: Refuse, *, model: str, field: str) -> str:
    """The 400's message: both numbers, and what to do."""
    return (
        f"This model's maximum context length is {refused.most} tokens ({model!r}: the "
        f"smaller of its n_ctx cap in the profile and the length it was trained for); the "
        f"prompt has {refused.prompt_tokens} tokens. Shorten the {field}, or raise n_ctx in "
        "the profile if the model was trained for more."
    )
