"""The one Protocol every model backend implements.

A backend turns a :class:`~swapos.models.spec.ModelSpec` into a :class:`LoadedModel` and back.
All methods are ``async``: the llama backend runs the blocking work in worker threads (never
on the event loop), the fake backend sleeps on the injected clock. Model objects never travel
in messages: the Loader keeps them in its :class:`~swapos.actors.residency.Residency` and the
Generator looks them up by lease.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import msgspec

from swapos.data.generation import GenerationStats
from swapos.data.prefix import PrefixState
from swapos.data.residency import Offload
from swapos.data.sampling import SamplingParams
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat, FimTokens
from swapos.policies.spending import ModelCost


class GenerationOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What one generation produced.

    Attributes:
        text: the generated text, cut before any stop sequence.
        stats: its token counts, timings and stop reason.
        saved: the KV state snapshot taken at ``save_at`` tokens, if one was asked for.
        final: with ``save_final``, the KV state after the generation: the prompt plus the
            generated tokens that were evaluated into the KV cache (the last sampled token,
            an end-of-generation or stop token, never is).
        read: the tokens of ``final`` whether or not it was kept: what the model read.
        prompt_state: with ``save_final``, for a model whose states cannot be cut back (a
            sliding window, ``kv_window``), the state holding all of the prompt but its last
            token, taken during the prefill: a retry whose prompt diverges inside this answer,
            or repeats this prompt, restores it whole (no cut needed).
    """

    text: str
    stats: GenerationStats
    saved: PrefixState | None = None
    final: PrefixState | None = None
    read: tuple[int, ...] = ()
    prompt_state: PrefixState | None = None


class LoadedModel(Protocol):
    """A model that is resident in memory."""

    @property
    def spec(self) -> ModelSpec:
        """The spec it was loaded from."""
        ...

    @property
    def footprint_bytes(self) -> int:
        """Memory it holds, measured after the load (RSS delta for the llama backend)."""
        ...

    @property
    def offload(self) -> Offload | None:
        """Its layers on a GPU (device, layers, measured device bytes, upload time), or None
        when everything is on the host."""
        ...

    @property
    def kv_identity(self) -> str:
        """Key of the states this model can restore: file identity + settings (the offload
        setting among them) + versions."""
        ...

    @property
    def kv_window(self) -> int | None:
        """The sliding attention window in tokens (Gemma 3: 512), None without one. A state
        longer than the window cannot be cut back (its oldest cells were reused), so only a
        state that is wholly a prefix of the prompt can be restored."""
        ...

    async def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of ``text`` (with the BOS token the model expects); with ``special``,
        special-token text (``<|im_start|>``: a chat template's markup) becomes those tokens."""
        ...

    async def generate(
        self,
        prompt: list[int],
        params: SamplingParams,
        *,
        restore: PrefixState | None = None,
        save_at: int | None = None,
        save_final: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> GenerationOutput:
        """Generate a continuation of ``prompt``.

        Args:
            prompt: prompt token ids.
            params: sampling parameters.
            restore: a saved state sharing a common prefix of ``k`` tokens with ``prompt``;
                restored, truncated to ``k`` tokens if it holds more, instead of prefilling
                those tokens (``kv_restored_tokens == k``, at most ``len(prompt) - 1``). If
                restoring or truncating fails or is unsafe (e.g. a sliding-window cache
                lacks cells the truncated state needs) the backend falls back to a full
                prefill (``kv_restored_tokens == 0``).
            save_at: snapshot the KV state after prefilling this many prompt tokens.
            save_final: snapshot the KV state after the generation (``final``).
            on_token: called on the event loop thread with each decoded text piece.

        On cancellation the backend stops within one token, then re-raises.
        """
        ...

    async def close(self) -> None:
        """Free the model's memory. Idempotent."""
        ...


@runtime_checkable
class TextPromptModel(Protocol):
    """A loaded model that takes its prompt as text, not tokens: a remote model behind an
    API (``backends/api``). The Generator sends it the prompt as it is, with no tokenizing,
    no context check and no KV state (a remote server's cache is its own business); its
    ``tokenize`` and token ``generate`` are not available.
    """

    async def generate_text(
        self,
        prompt: str,
        params: SamplingParams,
        *,
        chat: bool,
        on_token: Callable[[str], None] | None = None,
    ) -> GenerationOutput:
        """Generate a continuation of ``prompt``: with ``chat``, the conversation that
        :func:`~swapos.models.templates.render_chat` encoded for a ``messages`` format,
        answered as the next assistant turn; otherwise plain text to continue.

        ``on_token`` is called on the event loop thread with each text piece. On
        cancellation the request is abandoned within one piece and the cancellation is
        re-raised.

        Raises:
            GenerationError: the endpoint failed, refused the request or timed out (the
                message names its URL and what it said).
        """
        ...


class DrawOutput(msgspec.Struct, frozen=True, kw_only=True):
    """One finished draw of :meth:`DrawsModel.generate_draws`.

    Attributes:
        index: its place in the call's ``draws`` (whose ``SamplingParams`` it sampled with).
        output: its text and stats, as the same draw generated alone would report them;
            ``read`` is the prompt and the draw's decoded tokens; no KV state is saved.
    """

    index: int
    output: GenerationOutput


@runtime_checkable
class DrawsModel(Protocol):
    """A loaded model that decodes several sampled draws of one prompt side by side (the
    llama backend: one sequence each in one context, sharing the prompt's KV cells)."""

    async def generate_draws(
        self,
        prompt: list[int],
        draws: Sequence[SamplingParams],
        *,
        restore: PrefixState | None = None,
        on_draw: Callable[[DrawOutput], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[DrawOutput]:
        """Decode one continuation of ``prompt`` per item of ``draws``, in lockstep.

        Each draw samples with its own ``SamplingParams`` (seed, temperature, stops,
        ``max_tokens``) exactly as :meth:`LoadedModel.generate` would alone: the same text
        where the numerics allow (a batch of several sequences is not bit-identical to a
        batch of one on every kernel).

        Args:
            prompt: prompt token ids, prefilled once for all the draws.
            draws: the sampling of each draw (at least one).
            restore: a saved prefix state, used as :meth:`LoadedModel.generate` uses it.
            on_draw: called on the event loop thread with each draw as soon as it finishes,
                while the others go on.
            stop: polled between steps (from a worker thread); once it returns True the
                draws still running are dropped and the call returns.

        Returns:
            The finished draws in the order they finished (those dropped by ``stop`` are
            not in it).

        On cancellation the backend stops within one step, then re-raises.
        """
        ...


class ModelBackend(Protocol):
    """Loads models. One backend instance serves a whole system."""

    def estimate_footprint(self, spec: ModelSpec) -> int:
        """Host bytes the model is expected to hold once loaded (before measuring)."""
        ...

    def estimate_device_footprint(self, spec: ModelSpec) -> int:
        """GPU bytes the model is expected to hold once loaded: its offloaded layers
        (``spec.gpu_layers``) and their KV cache; 0 when it offloads nothing."""
        ...

    def estimate_state_bytes(self, spec: ModelSpec) -> int:
        """Host bytes of the largest KV state the model can save (its whole context): the
        memory one saved state takes while it is handed to the KV cache; 0 when it saves
        none in this process."""
        ...

    def draw_curve(self, spec: ModelSpec) -> dict[int, float]:
        """The measured wall of one decode batch of ``k`` tokens against one token,
        ``{k: ratio}`` for ``k >= 2`` (``bench decode``'s cost curve for this model and
        machine): what decoding ``k`` draws side by side costs per step
        (:mod:`swapos.policies.draws`). Empty when nothing is measured (draws go in turn).
        Reads files only; blocking, so call it from a worker thread."""
        ...

    def check_devices(self, specs: Sequence[ModelSpec]) -> None:
        """Refuse, before anything runs, specs that ask for what this backend cannot do
        (layers on a GPU with a CPU-only build).

        Raises:
            ProfileError: one line naming the model's ``gpu_layers`` and how to install a
                GPU build (:data:`~swapos.sysinfo.GPU_INSTALL_HINT`).
        """
        ...

    async def load(
        self, spec: ModelSpec, *, progress: Callable[[float], None] | None = None
    ) -> LoadedModel:
        """Load ``spec``.

        ``progress``, when given, is told how far the load has gone (0 to 1) as the backend
        knows it (llama.cpp's progress callback; the fake backend's clock), possibly from a
        worker thread: it must only store the value.

        Raises:
            ModelFileError: the file is missing, truncated or not loadable (says which).

        On cancellation the load is aborted as soon as the backend can, whatever it
        allocated is freed, and the cancellation is re-raised.
        """
        ...

    async def warm(self, spec: ModelSpec) -> None:
        """Bring the model's file into the OS page cache (a cheap prefetch)."""
        ...

    async def drop_page_cache(self, spec: ModelSpec) -> bool:
        """Ask the OS to drop ``spec``'s file from the page cache (``--cold`` benchmarks:
        a model that is not resident is not cached either). False if unsupported."""
        ...

    def chat_format(self, spec: ModelSpec) -> ChatFormat | None:
        """``spec``'s chat template and special tokens, or None for a model without one.
        Blocking (it may read the file): call it from a worker thread.

        Raises:
            ModelFileError: the file is missing or not loadable.
        """
        ...

    def token_counter(self, spec: ModelSpec) -> Callable[[str], int]:
        """A function counting tokens of text as ``spec``'s tokenizer does, without loading
        the weights. Blocking (it may read the vocabulary): call it from a worker thread."""
        ...

    def model_cost(self, spec: ModelSpec) -> ModelCost | None:
        """What ``spec``'s tokens cost on this machine, as measured (``bench decode``'s
        step and prefill walls), or None when nothing is measured. Blocking (it may read
        files): call it from a worker thread."""
        ...

    def fim_tokens(self, spec: ModelSpec) -> FimTokens | None:
        """The text of ``spec``'s fill-in-the-middle tokens, as its vocabulary has them
        (None: it has none). Blocking (it may read the vocabulary): call it from a worker
        thread.

        Raises:
            ModelFileError: the file is missing or not loadable.
        """
        ...
