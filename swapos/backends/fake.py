"""A scripted backend on the injected clock, for deterministic tests of the actors.

Nothing here touches a real model: loads, prefills and tokens take scripted amounts of the
clock's time, so with :class:`~swapos.testing.FakeClock` a test can prove, in virtual time,
that a load overlaps a generation or that a warm-up shortens a load.
"""

from __future__ import annotations

import functools
import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal

import anyio
import msgspec

from swapos.backends.base import DrawOutput, GenerationOutput
from swapos.backends.errors import LIBRARY_ERRORS, map_exceptions
from swapos.backends.fake_slots import Lockstep
from swapos.backends.stops import StopStream
from swapos.clock import Clock
from swapos.data.constraint import Constraint
from swapos.data.generation import GenerationStats, StopReason
from swapos.data.prefix import PrefixState
from swapos.data.residency import Offload
from swapos.data.sampling import SamplingParams
from swapos.errors import GenerationError, ModelFileError
from swapos.models.resolve import refuse_offload
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat, FimTokens
from swapos.policies.draws import curve_from_ratios
from swapos.policies.slots import step_width
from swapos.policies.spending import ModelCost
from swapos.policies.tokens import can_cut_back, common_prefix_len

LOAD_REPORTS = 4
"""A fake load tells its progress this many times (each quarter of its read)."""


class FakeModelScript(msgspec.Struct, frozen=True, kw_only=True):
    """How a fake model behaves.

    Attributes:
        load_s: load time from a cold page cache.
        warm_load_s: load time once :meth:`FakeBackend.warm` ran (defaults to ``load_s``).
        warm_s: how long the warm-up itself takes.
        footprint_bytes: host memory it holds once loaded.
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


class FakeModel:
    """A loaded fake model; tokens are characters (so prefixes line up exactly)."""

    def __init__(
        self,
        backend: FakeBackend,
        spec: ModelSpec,
        script: FakeModelScript,
        offload: Offload | None = None,
    ) -> None:
        self._backend = backend
        self._spec = spec
        self._script = script
        self._offload = offload
        self.closed = False
        self._lockstep = _lockstep(backend, spec, script) if spec.slots > 1 else None

    @property
    def spec(self) -> ModelSpec:
        return self._spec

    @property
    def footprint_bytes(self) -> int:
        return self._script.footprint_bytes

    @property
    def offload(self) -> Offload | None:
        return self._offload

    @property
    def kv_identity(self) -> str:
        return f"fake:{self._spec.name}:{self._spec.n_ctx}:ngl={self._spec.gpu_layers}"

    @property
    def kv_window(self) -> int | None:
        return self._script.kv_window

    async def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [ord(c) for c in text]

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
        """Restore (a common prefix of ``k`` tokens restores ``k``, at most all but the last
        prompt token, as llama.cpp does), prefill the rest, emit the scripted reply.

        With slots (``spec.slots > 1``) it waits for a free slot and makes its tokens in
        steps shared with the generations beside it (``backends/fake_slots.py``).

        Raises:
            GenerationError: the script fails this generation (``fail_generations``).
        """
        edge = map_exceptions(
            {LIBRARY_ERRORS: GenerationError}, f"generating with model {self._spec.name!r}"
        )
        with edge:
            if self._lockstep is None:
                return await self._generate(
                    prompt, params, restore=restore, save_at=save_at, save_final=save_final,
                    on_token=on_token,
                )  # fmt: skip
            async with self._lockstep.seat() as order:
                return await self._generate(
                    prompt, params, restore=restore, save_at=save_at, save_final=save_final,
                    on_token=on_token, order=order,
                )  # fmt: skip

    async def _generate(
        self,
        prompt: list[int],
        params: SamplingParams,
        *,
        restore: PrefixState | None,
        save_at: int | None,
        save_final: bool,
        on_token: Callable[[str], None] | None,
        order: int = 0,
    ) -> GenerationOutput:
        clock, script = self._backend.clock, self._script
        self._backend.prompts.append((self._spec.name, "".join(map(chr, prompt))))
        self._backend.params.append((self._spec.name, params))
        backend = self._backend
        start = clock.now()
        restored = 0
        if restore is not None:
            await backend.stall("restore_hang")
            if not script.fail_restore and not backend.fault("restore_fail"):
                common = common_prefix_len(restore.tokens, prompt)
                if can_cut_back(len(restore.tokens), common, script.kv_window):
                    restored = min(common, max(len(prompt) - 1, 0))
        await clock.sleep(script.prefill_s_per_token * (len(prompt) - restored))
        done = backend.generations.get(self._spec.name, 0)
        backend.generations[self._spec.name] = done + 1
        if done in script.fail_generations or backend.fault("generate_fail"):
            raise RuntimeError("llama_decode failed with status -3")
        saved = None
        if save_at is not None and 0 < save_at <= len(prompt):
            await self._save_faults()
            saved = PrefixState(tokens=tuple(prompt[:save_at]), state=self.kv_identity.encode())
        await backend.stall("generate_hang")
        prefill_s = clock.now() - start
        reply = script.reply
        if script.replies:
            reply = script.replies[min(done, len(script.replies) - 1)]
        reply = constrained_reply(reply, params.constraint)
        words = reply.split(" ") if reply else []
        pieces = words[:1] + [" " + w for w in words[1:]]  # joined, exactly the reply
        text, n, reason, first_at = await self._decode(pieces, params, on_token, order)
        end = clock.now()
        final = None
        # The KV holds every piece but the last sampled one (never decoded), unless the
        # reply ran out (EOS: everything sampled was decoded).
        kept = pieces[:n] if reason == "eos" else pieces[: max(n - 1, 0)]
        read = (*prompt, *(ord(c) for c in "".join(kept)))
        prompt_state = None
        if save_final and prompt:
            await self._save_faults()
            final = PrefixState(tokens=read, state=self.kv_identity.encode())
            if script.kv_window is not None and len(prompt) > 1:
                held = tuple(prompt[:-1])  # all but the last token, as the llama backend keeps
                prompt_state = PrefixState(tokens=held, state=self.kv_identity.encode())
        stats = GenerationStats(
            prompt_tokens=len(prompt),
            kv_restored_tokens=restored,
            prefill_tokens=len(prompt) - restored,
            prefill_s=prefill_s,
            ttft_s=(first_at or end) - start,
            tokens=n,
            gen_s=end - (first_at or end),
            stop_reason=reason,
        )
        return GenerationOutput(
            text=text, stats=stats, saved=saved, final=final, read=read, prompt_state=prompt_state
        )

    async def _decode(
        self,
        pieces: list[str],
        params: SamplingParams,
        on_token: Callable[[str], None] | None,
        order: int,
    ) -> tuple[str, int, StopReason, float]:
        """Stream ``pieces`` one token each: (text, tokens, why it ended, first token's time).
        Text that could begin a stop sequence is held back, as a real model's is."""
        clock, stream = self._backend.clock, StopStream(params.stop)
        n, first_at = 0, 0.0
        reason: StopReason = "eos"
        for piece in pieces:
            if n >= params.max_tokens:
                reason = "length"
                break
            if self._lockstep is not None:
                await self._lockstep.step(order)
            else:
                await clock.sleep(self._script.token_s / self._backend.slowdown())
            n += 1
            if n == 1:
                first_at = clock.now()
            emit = stream.add(piece)
            if emit and on_token is not None:
                on_token(emit)
            if stream.stopped:
                reason = "stop"
                break
        rest = stream.finish()
        if rest and on_token is not None:
            on_token(rest)
        return stream.text, n, reason, first_at

    async def generate_draws(
        self,
        prompt: list[int],
        draws: Sequence[SamplingParams],
        *,
        restore: PrefixState | None = None,
        on_draw: Callable[[DrawOutput], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[DrawOutput]:
        """Side-by-side draws on the clock: one prefill, then lockstep steps of
        ``token_s * draw_step_cost[k - 1]`` while ``k`` draws run. Draw ``i`` answers what
        the ``i``-th of the same draws in turn would (the script's next replies, in order),
        with the same stop rules; ``on_draw`` gets each as it ends, ``stop`` is polled
        before every step. Counts as ``len(draws)`` generations.

        Raises:
            GenerationError: the script fails the first of these generations.
        """
        with map_exceptions(
            {LIBRARY_ERRORS: GenerationError}, f"drawing with model {self._spec.name!r}"
        ):
            return await self._draws(prompt, draws, restore, on_draw, stop)

    async def _draws(
        self,
        prompt: list[int],
        draws: Sequence[SamplingParams],
        restore: PrefixState | None,
        on_draw: Callable[[DrawOutput], None] | None,
        stop: Callable[[], bool] | None,
    ) -> list[DrawOutput]:
        clock, script, backend = self._backend.clock, self._script, self._backend
        backend.prompts.append((self._spec.name, "".join(map(chr, prompt))))
        start = clock.now()
        restored = 0
        if restore is not None and not script.fail_restore:
            common = common_prefix_len(restore.tokens, prompt)
            if can_cut_back(len(restore.tokens), common, script.kv_window):
                restored = min(common, max(len(prompt) - 1, 0))
        await clock.sleep(script.prefill_s_per_token * (len(prompt) - restored))
        done = backend.generations.get(self._spec.name, 0)
        backend.generations[self._spec.name] = done + len(draws)
        if done in script.fail_generations:
            raise RuntimeError("llama_decode failed with status -3")
        prefill_s = clock.now() - start
        replies = script.replies or (script.reply,)
        live = [
            _FakeDraw(i, p, replies[min(done + i, len(replies) - 1)]) for i, p in enumerate(draws)
        ]
        finished: list[DrawOutput] = []
        ended = [d for d in live if d.empty]
        for d in ended:
            d.reason = "length" if d.pieces else "eos"  # as _decode: capped before a piece
        while True:
            for d in ended:
                live.remove(d)
                out = DrawOutput(index=d.index, output=d.output(prompt, restored, start, prefill_s))
                finished.append(out)
                if on_draw is not None:
                    on_draw(out)
            if not live or (stop is not None and stop()):
                return finished
            costs = script.draw_step_cost or (1.0,)
            await clock.sleep(script.token_s * costs[min(len(live), len(costs)) - 1])
            ended = [d for d in live if d.step(clock.now())]

    async def _save_faults(self) -> None:
        await self._backend.stall("save_hang")
        if self._backend.fault("save_fail"):
            raise RuntimeError("llama_state_seq_get_data failed")

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._backend.open_models.discard(self)
            self._backend.resident_bytes -= self._script.footprint_bytes
            if self._offload is not None:
                self._backend.device_resident_bytes -= self._offload.device_bytes


def _lockstep(backend: FakeBackend, spec: ModelSpec, script: FakeModelScript) -> Lockstep:
    """The slots of a fake model: a step of ``k`` costs ``token_s`` times the script's
    ``draw_step_cost`` at ``k`` (1.0 for every ``k`` when it scripts none)."""
    costs = script.draw_step_cost or (1.0,)

    def step_s(k: int) -> float:
        return script.token_s * costs[min(k, len(costs)) - 1] / backend.slowdown()

    width = functools.partial(step_width, curve_from_ratios(script.draw_step_cost))
    return Lockstep(backend.clock, spec.slots, step_s=step_s, width=width)


def constrained_reply(reply: str, constraint: Constraint | None) -> str:
    """What a fake model answers under ``constraint``: its scripted reply where that has
    the shape of the constraint's example (the same text around one JSON value that
    parses), else the example itself; a lazy constraint (free text until a call starts)
    leaves the reply as scripted."""
    if constraint is None or constraint.lazy or _same_shape(reply, constraint.example):
        return reply
    return constraint.example


def _same_shape(reply: str, example: str) -> bool:
    starts = [i for i in (example.find("{"), example.find("[")) if i >= 0]
    start = min(starts) if starts else 0
    try:
        _, end = json.JSONDecoder().raw_decode(example, start)
    except json.JSONDecodeError:
        return reply == example
    before, after = example[:start], example[end:]
    if not (reply.startswith(before) and reply.endswith(after)):
        return False
    try:
        json.loads(reply[len(before) : len(reply) - len(after)])
    except json.JSONDecodeError:
        return False
    return True


class _FakeDraw:
    """One draw of :meth:`FakeModel.generate_draws`: its reply's pieces, one per step."""

    def __init__(self, index: int, params: SamplingParams, reply: str) -> None:
        words = reply.split(" ") if reply else []
        self.index, self.params = index, params
        self.pieces = words[:1] + [" " + w for w in words[1:]]
        self.stream = StopStream(params.stop)
        self.n, self.first, self.end = 0, 0.0, 0.0
        self.reason: StopReason = "eos"

    @property
    def empty(self) -> bool:
        """Nothing to sample: it ends before any step, as a generation in turn would."""
        return not self.pieces or self.params.max_tokens <= 0

    def step(self, now: float) -> bool:
        """Sample one piece at ``now``; True when the draw has ended (the rules of
        ``FakeModel._decode``: a stop sequence, the reply's end, ``max_tokens``)."""
        if self.n == 0:
            self.first = now
        self.end = now
        self.stream.add(self.pieces[self.n])
        self.n += 1
        if self.stream.stopped:
            self.reason = "stop"
            return True
        if self.n < len(self.pieces) and self.n < self.params.max_tokens:
            return False
        self.reason = "eos" if self.n == len(self.pieces) else "length"
        self.stream.finish()
        return True

    def output(
        self, prompt: list[int], restored: int, start: float, prefill_s: float
    ) -> GenerationOutput:
        stats = GenerationStats(
            prompt_tokens=len(prompt),
            kv_restored_tokens=restored,
            prefill_tokens=len(prompt) - restored,
            prefill_s=prefill_s,
            ttft_s=self.first - start,
            tokens=self.n,
            gen_s=self.end - self.first,
            stop_reason=self.reason,
        )
        kept = "".join(self.pieces[: self.n if self.reason == "eos" else max(self.n - 1, 0)])
        return GenerationOutput(
            text=self.stream.text, stats=stats, read=(*prompt, *(ord(c) for c in kept))
        )


class FakeBackend:
    """Scripted loads and generations by model name.

    Attributes:
        open_models: models loaded and not yet closed (tests assert it ends empty).
        resident_bytes, peak_resident_bytes: footprints of open models, now and at peak.
        loads: names of completed loads, in order.
        warmed: names whose file is "in the page cache".
        prompts: ``(model, prompt text)`` of every generation, in order.
        generations: generations per model name (the index into a script's ``replies``).
        contention: share of decode speed lost while a load runs (a 2-core CPU machine);
            0 models a GPU box where loads and generation do not compete.
        faults: random failures and stalls of every model (:class:`FakeFaults`).
        injected: the faults injected so far, by kind.
        gpu: the fake is a GPU build (False: a CPU-only build, whose
            :meth:`check_devices` refuses specs with ``gpu_layers``).
        device_memory: the fake GPU's memory: a load that would take more fails as
            llama.cpp's does (out of device memory); None: unbounded.
        device_resident_bytes, peak_device_bytes: device bytes of open models, now and at
            peak.
    """

    def __init__(
        self,
        clock: Clock,
        scripts: dict[str, FakeModelScript],
        *,
        contention: float = 0.0,
        faults: FakeFaults | None = None,
        gpu: bool = True,
        device_memory: int | None = None,
    ) -> None:
        self.clock = clock
        self.gpu = gpu
        self.device_memory = device_memory
        self.device_resident_bytes = 0
        self.peak_device_bytes = 0
        self.faults = faults or FakeFaults()
        self._rng = random.Random(self.faults.seed)
        self.injected: Counter[Fault] = Counter()
        self.contention = contention
        self.loading = 0
        self.scripts = scripts
        self.open_models: set[FakeModel] = set()
        self.loads: list[str] = []
        self.warmed: set[str] = set()
        self.resident_bytes = 0
        self.prompts: list[tuple[str, str]] = []
        self.params: list[tuple[str, SamplingParams]] = []  # what each generation was asked
        self.generations: dict[str, int] = {}
        self.peak_resident_bytes = 0

    def _script(self, spec: ModelSpec) -> FakeModelScript:
        try:
            return self.scripts[spec.name]
        except KeyError:
            raise ModelFileError(f"fake backend has no script for model {spec.name!r}") from None

    def slowdown(self) -> float:
        """The share of decode speed left while a load runs (``contention``)."""
        return 1 - self.contention if self.loading else 1.0

    def fault(self, kind: Fault) -> bool:
        """Whether to inject ``kind`` now (drawn only when its probability is not 0)."""
        p: float = getattr(self.faults, kind)
        if p <= 0 or self._rng.random() >= p:
            return False
        self.injected[kind] += 1
        return True

    async def stall(self, kind: Fault) -> None:
        """Sleep ``hang_s`` if a stall of ``kind`` is drawn."""
        if self.fault(kind):
            await self.clock.sleep(self.faults.hang_s)

    def estimate_footprint(self, spec: ModelSpec) -> int:
        return spec.footprint_bytes or self._script(spec).footprint_bytes

    def estimate_device_footprint(self, spec: ModelSpec) -> int:
        """The script's ``device_bytes`` when ``spec`` offloads layers, else 0."""
        return self._script(spec).device_bytes if spec.offloaded else 0

    def estimate_state_bytes(self, spec: ModelSpec) -> int:
        """The script's ``state_bytes`` (0 by default: a fake state is a few bytes)."""
        return self._script(spec).state_bytes

    def draw_curve(self, spec: ModelSpec) -> dict[int, float]:
        """The script's ``draw_step_cost`` as a curve (``{k: cost}``, ``k >= 2``); empty
        (nothing measured: draws in turn) when it scripts none."""
        return curve_from_ratios(self._script(spec).draw_step_cost)

    def check_devices(self, specs: Sequence[ModelSpec]) -> None:
        """A CPU-only fake (``gpu=False``) refuses a spec with layers on a GPU.

        Raises:
            ProfileError: naming the model and how to install a GPU build.
        """
        if not self.gpu:
            refuse_offload(specs, build="this fake backend is a CPU-only build")

    async def load(
        self, spec: ModelSpec, *, progress: Callable[[float], None] | None = None
    ) -> FakeModel:
        """Read the file (``load_s``, or ``warm_load_s`` once warmed), then upload the
        offloaded layers (``upload_s``) into the fake GPU's memory. ``progress`` is told
        each quarter of the read, on the clock (:data:`LOAD_REPORTS`).

        Raises:
            ModelFileError: a scripted or injected failure, or the upload would exceed
                ``device_memory`` (as llama.cpp fails to allocate a device buffer).
        """
        script = self._script(spec)
        warm = spec.name in self.warmed
        load_s = script.warm_load_s if warm and script.warm_load_s is not None else script.load_s
        device_bytes = self.estimate_device_footprint(spec)
        self.loading += 1
        try:
            await self.stall("load_hang")
            await self._read(load_s, progress)
            if spec.offloaded:
                await self.clock.sleep(script.upload_s)
        finally:
            self.loading -= 1
        if script.fail_load is not None:
            raise ModelFileError(script.fail_load)
        if self.fault("load_fail"):
            raise ModelFileError(f"injected fault: cannot load {spec.name!r}")
        offload = None
        if spec.offloaded:
            used = self.device_resident_bytes + device_bytes
            if self.device_memory is not None and used > self.device_memory:
                raise ModelFileError(
                    f"fake GPU out of memory loading {spec.name!r}: {used} > "
                    f"{self.device_memory} bytes"
                )
            layers = script.gpu_layers if script.gpu_layers is not None else spec.gpu_layers
            offload = Offload(
                device="FakeGPU0",
                layers=32 if layers < 0 else layers,
                device_bytes=device_bytes,
                upload_s=script.upload_s,
            )
            self.device_resident_bytes = used
            self.peak_device_bytes = max(self.peak_device_bytes, used)
        model = FakeModel(self, spec, script, offload)
        self.open_models.add(model)
        self.resident_bytes += script.footprint_bytes
        self.peak_resident_bytes = max(self.peak_resident_bytes, self.resident_bytes)
        self.loads.append(spec.name)
        return model

    async def _read(self, seconds: float, progress: Callable[[float], None] | None) -> None:
        """Sleep ``seconds`` on the clock, telling ``progress`` each step of the way (its
        reports sleep beside the read: the read ends at the same time as without them)."""
        if progress is None or seconds <= 0:
            await self.clock.sleep(seconds)
            return

        async def report() -> None:
            for i in range(1, LOAD_REPORTS):
                await self.clock.sleep(seconds / LOAD_REPORTS)
                progress(i / LOAD_REPORTS)

        async with anyio.create_task_group() as tg:
            tg.start_soon(report)
            await self.clock.sleep(seconds)
            tg.cancel_scope.cancel()
        progress(1.0)

    async def drop_page_cache(self, spec: ModelSpec) -> bool:
        self.warmed.discard(spec.name)
        return True

    def token_counter(self, spec: ModelSpec) -> Callable[[str], int]:
        """Fake tokens are characters."""
        return len

    def model_cost(self, spec: ModelSpec) -> ModelCost:
        """The script's token and prefill times (as milliseconds)."""
        script = self._script(spec)
        return ModelCost(
            ms_per_token=script.token_s * 1000,
            prefill_ms_per_token=script.prefill_s_per_token * 1000,
        )

    def fim_tokens(self, spec: ModelSpec) -> FimTokens | None:
        """The script's fill-in-the-middle tokens, if it has them."""
        return self._script(spec).fim

    def chat_format(self, spec: ModelSpec) -> ChatFormat | None:
        """The script's chat template, if it has one."""
        template = self._script(spec).chat_template
        return ChatFormat(template=template) if template is not None else None

    async def warm(self, spec: ModelSpec) -> None:
        await self.clock.sleep(self._script(spec).warm_s)
        self.warmed.add(spec.name)
