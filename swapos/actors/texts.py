"""How each model reads text: its tokenizer (as a counting function) and its chat format; and
what its draws side by side cost (its measured cost curve)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.to_thread
import structlog

from swapos.backends.base import ModelBackend
from swapos.errors import SwapOSError
from swapos.models.profile import Profile
from swapos.models.spec import ModelSpec
from swapos.models.templates import CHATML, ChatFormat, FimTokens
from swapos.policies.spending import ModelCost

log = structlog.get_logger(__name__)


class ModelTexts:
    """A read-through cache of every model's tokenizer and chat format, shared by the Router
    and the :class:`~swapos.actors.handle.System` handle (as the Loader and the Generator
    share the :class:`~swapos.actors.residency.Residency`).

    It is no actor's private state: each entry is read once, off the event loop, from the
    model file, and never changes after; whoever asks first fills it (a second asker during
    the read keeps the first value). Neither method holds any lock or actor.
    """

    def __init__(
        self, *, backend: ModelBackend, specs: dict[str, ModelSpec], profile: Profile
    ) -> None:
        self._backend = backend
        self._specs = specs
        self._profile = profile
        self._counters: dict[str, Callable[[str], int]] = {}
        self._chat: dict[str, ChatFormat | None] = {}
        self._fim: dict[str, FimTokens | None] = {}
        self._costs: dict[str, ModelCost | None] = {}
        self._curves: dict[str, dict[int, float]] = {}

    async def read_all(self) -> None:
        """Read every model's tokenizer and chat format now (the Router does at startup, so
        that no task waits for them). A model whose file cannot be read is logged and left
        out: its phases fail with the reason, startup does not. Cost curves are read at a
        model's first draws instead: that model is loaded by then, so the file digest the
        curve's cache is keyed by is known, and a model that never draws costs nothing."""
        for model in self._specs:
            try:
                await self.token_counter(model)
                await self.chat_format(model)
            except SwapOSError as exc:
                log.warning("token_counter.unavailable", model=model, reason=str(exc))

    async def token_counter(self, model: str) -> Callable[[str], int]:
        """The tokenizer of ``model`` as a counting function (built once, off the loop).

        Raises:
            SwapOSError: the model file cannot be read (nothing is cached: a later call
                tries again).
        """
        if model not in self._counters:
            spec = self._specs[model]
            counter = await anyio.to_thread.run_sync(self._backend.token_counter, spec)
            self._counters.setdefault(model, counter)
        return self._counters[model]

    async def chat_format(self, model: str) -> ChatFormat | None:
        """How to render ``model``'s chat prompts, or None to prompt it as a base model:
        the profile's ``prompt`` setting, else its GGUF's chat template (read once, off the
        loop)."""
        if model not in self._chat:
            style = self._profile.models[model].prompt
            fmt: ChatFormat | None = None
            if style != "completion":
                fmt = await anyio.to_thread.run_sync(self._backend.chat_format, self._specs[model])
            if style == "chat" and fmt is None:
                fmt = ChatFormat(template=CHATML)
            self._chat.setdefault(model, fmt)
        return self._chat[model]

    async def fim_tokens(self, model: str) -> FimTokens | None:
        """``model``'s fill-in-the-middle tokens (None: none), read once, off the loop.

        Raises:
            SwapOSError: the model file cannot be read.
        """
        if model not in self._fim:
            fim = await anyio.to_thread.run_sync(self._backend.fim_tokens, self._specs[model])
            self._fim.setdefault(model, fim)
        return self._fim[model]

    async def model_cost(self, model: str) -> ModelCost | None:
        """``model``'s measured token costs (None: not measured), read once, off the loop."""
        if model not in self._costs:
            cost = await anyio.to_thread.run_sync(self._backend.model_cost, self._specs[model])
            self._costs.setdefault(model, cost)
        return self._costs[model]

    async def draw_curve(self, model: str) -> dict[int, float]:
        """``model``'s measured cost of a batch of ``k`` tokens against one (``{k: ratio}``;
        empty: nothing measured), read once, off the loop (``ModelBackend.draw_curve``)."""
        if model not in self._curves:
            spec = self._specs[model]
            curve = await anyio.to_thread.run_sync(self._backend.draw_curve, spec)
            self._curves.setdefault(model, curve)
        return self._curves[model]
