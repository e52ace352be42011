"""A scripted backend on the injected clock, for deterministic tests of the actors.

Nothing here touches a real model: loads, prefills and tokens take scripted amounts of the
clock's time, so with :class:`~swapos.testing.FakeClock` a test can prove, in virtual time,
that a load overlaps a generation or that a warm-up shortens a load.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence

import anyio
import msgspec

from swapos.backends.fake_model import FakeModel
from swapos.backends.fake_script import FakeFaults, FakeModelScript, Fault
from swapos.clock import Clock
from swapos.data.residency import Offload
from swapos.data.sampling import SamplingParams
from swapos.errors import ModelFileError
from swapos.models.resolve import refuse_offload
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat, FimTokens
from swapos.policies.draws import curve_from_ratios
from swapos.policies.spending import ModelCost

LOAD_REPORTS = 4
"""A fake load tells its progress this many times (each quarter of its read)."""


def host_bytes(spec: ModelSpec, script: FakeModelScript) -> int:
    """What a fake model loaded as ``spec`` holds: its footprint and its context's KV."""
    return script.footprint_bytes + script.ctx_bytes_per_token * spec.n_ctx * max(spec.slots, 1)


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

    def closed(self, model: FakeModel) -> None:
        """``model`` was closed: its memory is given back."""
        self.open_models.discard(model)
        self.resident_bytes -= model.footprint_bytes
        if model.offload is not None:
            self.device_resident_bytes -= model.offload.device_bytes

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
        """``spec.footprint_bytes`` if set, else the script's (its context's KV included)."""
        return spec.footprint_bytes or host_bytes(spec, self._script(spec))

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
        script = msgspec.structs.replace(script, footprint_bytes=host_bytes(spec, script))
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
