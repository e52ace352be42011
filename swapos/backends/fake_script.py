"""How a fake model behaves: its script (times, footprint, replies, templates) and the
faults a fake backend injects (plain data; :mod:`swapos.backends.fake` plays them)."""

from __future__ import annotations

from typing import Literal

import msgspec

from swapos.models.templates import FimTokens


class FakeModelScript(msgspec.Struct, frozen=True, kw_only=True):
    """How a fake model behaves.

    Attributes:
        load_s: load time from a cold page cache.
        warm_load_s: load time once :meth:`FakeBackend.warm` ran (defaults to ``load_s``).
        warm_s: how long the warm-up itself takes.
        footprint_bytes: host memory it holds once loaded (its weights and buffers).
        ctx_bytes_per_token: host memory of its KV cache per token of context (per slot):
            a model loaded with ``n_ctx`` tokens holds ``footprint_bytes`` plus
            ``n_ctx x slots x`` this (0: its footprint does not depend on its context).
        state_bytes: what its backend says its largest saved KV state takes
            (``estimate_state_bytes``; the process budget keeps that much free).
        device_bytes: GPU memory it holds once loaded when its spec offloads layers
            (``gpu_layers``): its layers and their KV cache. A partly offloaded model holds
            both ``footprint_bytes`` and ``device_bytes``.
        upload_s: the part of an offloaded load spent copying weights to the device, after
            the file read (``load_s`` or ``warm_load_s``); a warm-up never shortens it.
        gpu_layers: the layers llama.cpp would report offloaded (default: the spec's,
            ``"all"`` counting as 32).
        prefill_s_per_token: prefill cost of one prompt token.
        token_s: decode cost of one generated token.
        reply: the text it generates, one token per word (a token carries the space before
            its word, as SentencePiece tokens do), cut by stop sequences and ``max_tokens``.
        replies: successive generations answer these in turn (the last one repeats);
            ``reply`` when empty.
        chat_template: makes the model an instruct model with this chat template.
        fail_load: if set, every load fails with this reason.
        fail_restore: every restore fails (the backend falls back to a full prefill).
        fail_generations: these generations of the model (0 is its first) raise a raw
            ``RuntimeError`` mid-prefill, as a failing ``llama_decode`` does; the backend's
            edge maps it to :class:`~swapos.errors.GenerationError`.
        kv_window: a sliding attention window: a restored state longer than it cannot be cut
            back (the restore restores nothing, as llama.cpp's would).
        draw_step_cost: for :meth:`FakeModel.generate_draws` and a model with slots, the
            time of one lockstep step of ``k`` draws or generations as a multiple of
            ``token_s`` (item ``k - 1``; past the end, the last item); empty: 1.0 for every
            ``k`` (a flat cost curve). It is also the model's measured cost curve
            (:meth:`FakeBackend.draw_curve`), from which its slots are planned.
        fim: the model's fill-in-the-middle tokens (None: it has none).
    """

    load_s: float = 1.0
    warm_load_s: float | None = None
    warm_s: float = 0.0
    footprint_bytes: int = 100
    ctx_bytes_per_token: int = 0
    device_bytes: int = 0
    state_bytes: int = 0
    upload_s: float = 0.0
    gpu_layers: int | None = None
    prefill_s_per_token: float = 0.0
    token_s: float = 0.1
    reply: str = "ok"
    replies: tuple[str, ...] = ()
    chat_template: str | None = None
    fail_load: str | None = None
    fail_restore: bool = False
    fail_generations: tuple[int, ...] = ()
    kv_window: int | None = None
    draw_step_cost: tuple[float, ...] = ()
    fim: FimTokens | None = None


Fault = Literal[
    "load_fail",
    "load_hang",
    "generate_fail",
    "generate_hang",
    "save_fail",
    "save_hang",
    "restore_fail",
    "restore_hang",
]


class FakeFaults(msgspec.Struct, frozen=True, kw_only=True):
    """Faults injected at random into every model of a :class:`FakeBackend`: each field is
    the probability that one call fails (``*_fail``) or stalls for ``hang_s`` of the clock's
    time before going on (``*_hang``, cancellable). Drawn from ``random.Random(seed)`` in call
    order, so one seed and one order of calls inject the same faults.

    A failed load raises :class:`~swapos.errors.ModelFileError`; a failed generation or KV
    save raises a raw ``RuntimeError`` inside the backend's edge (as a failing
    ``llama_decode`` or ``llama_state_seq_get_data`` does), which maps it to
    :class:`~swapos.errors.GenerationError`; a failed restore prefills the whole prompt (as
    the llama backend does when ``llama_state_seq_set_data`` fails).
    """

    seed: int = 0
    load_fail: float = 0.0
    load_hang: float = 0.0
    generate_fail: float = 0.0
    generate_hang: float = 0.0
    save_fail: float = 0.0
    save_hang: float = 0.0
    restore_fail: float = 0.0
    restore_hang: float = 0.0
    hang_s: float = 600.0
