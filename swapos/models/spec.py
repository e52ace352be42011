"""The resolved description of one model: what the Loader needs to load it."""

from __future__ import annotations

import os

import msgspec


class RemoteEndpoint(msgspec.Struct, frozen=True, kw_only=True):
    """Where a remote model is served: an OpenAI-compatible API (see ``backends/api``).

    Attributes:
        base: the API's base URL, up to and including ``/v1`` (``http://127.0.0.1:8080/v1``).
        model: the model name the endpoint knows it by (the request's ``model``).
        key_env: the environment variable holding the bearer key, read when the model is
            "loaded" (never the key itself: profiles and logs hold no secrets); None: no key.
        timeout_s: how long one request may wait for the server to connect, answer or stream
            the next piece.
        continues: the endpoint continues a conversation's final assistant message
            (``continue_final_message``, as ``swapos serve`` and vLLM do), so the pipeline can
            open the answer for it (a code fence, a function's signature) as it does for a
            local model; without it the answer is left to the model.
    """

    base: str
    model: str
    key_env: str | None = None
    timeout_s: float = 600.0
    continues: bool = False


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One model, resolved from a profile: a real file path and its load settings.

    Attributes:
        name: the profile's name for the model (unique within a profile).
        path: absolute path of the GGUF file.
        n_ctx: context length the model is loaded with (its start: the Loader reloads it
            with a larger one, up to ``max_ctx``, when a request needs more;
            ``policies/contexts.py``).
        n_batch: llama.cpp batch size. Small by default: llama-cpp-python keeps an
            ``n_batch x n_vocab`` float buffer, ~0.5 GB for Gemma's 262k vocabulary at 512.
        n_threads: CPU threads for eval; ``None``: every core (:attr:`threads`).
        use_mmap: map the file instead of reading it.
        type_k: KV cache key type (``"f16"``, ``"q8_0"``...); part of the KV identity.
        type_v: KV cache value type.
        footprint_bytes: a measured or declared footprint; ``None`` means estimate it.
        repack: let llama.cpp repack weights into its CPU-optimised layouts (an anonymous
            copy of the repackable tensors, next to the mapped file).
        gpu_layers: layers offloaded to a GPU (llama.cpp's ``n_gpu_layers``): 0 none, -1
            every layer and the output head; part of the KV identity.
        main_gpu: the GPU (index among llama.cpp's GPU devices) that holds them.
        api: set for a remote model, served by an OpenAI-compatible endpoint: ``path`` is
            then the endpoint's URL (for messages and logs; there is no file), and the model
            holds no local memory.
        draft: the drafting costs file the decode loop reads, ``"off"``, or None: the ones
            ``bench decode`` cached for this file (see ``backends/llama/draft_costs.py``).
        slots: requests the model decodes side by side, each a sequence of its one context
            with ``n_ctx`` cells of its own (``backends/llama/slots.py``); 0: as many as its
            measured cost curve pays for (``policies/slots.py``, resolved when the system
            opens; 1 where nothing is measured).
        max_ctx: the most context it may be loaded with (the profile's ``n_ctx`` cap,
            bounded by ``trained_ctx``); 0: ``n_ctx``, it never grows.
        trained_ctx: the context length it was trained for (its GGUF's
            ``<arch>.context_length``); 0: unknown.
    """

    name: str
    path: str
    n_ctx: int = 2048
    n_batch: int = 128
    n_threads: int | None = None
    use_mmap: bool = True
    type_k: str = "f16"
    type_v: str = "f16"
    footprint_bytes: int | None = None
    repack: bool = False
    gpu_layers: int = 0
    main_gpu: int = 0
    api: RemoteEndpoint | None = None
    draft: str | None = None
    slots: int = 1
    max_ctx: int = 0
    trained_ctx: int = 0

    @property
    def ctx_cap(self) -> int:
        """The most context the model may be loaded with (never less than ``n_ctx``)."""
        return max(self.max_ctx, self.n_ctx)

    @property
    def threads(self) -> int:
        """The eval threads a model loaded from this spec uses: ``n_threads``, else every
        core (the llama backend's loads, its measured costs, and the benchmarks' peers)."""
        return self.n_threads or os.cpu_count() or 1

    @property
    def remote(self) -> bool:
        """True for a model served by an API endpoint, not loaded from a file."""
        return self.api is not None

    @property
    def offloaded(self) -> bool:
        """True when some of its layers go to a GPU."""
        return self.gpu_layers != 0
