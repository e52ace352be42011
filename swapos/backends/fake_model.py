"""A loaded fake model: scripted prefill, tokens and draws on its backend's clock.

Tokens are characters, so prefixes line up exactly. The model reads and writes its
backend's records through :class:`FakeHost` (:class:`~swapos.backends.fake.FakeBackend` is
the one host).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Protocol

from swapos.backends.base import DrawOutput, GenerationOutput
from swapos.backends.errors import LIBRARY_ERRORS, map_exceptions
from swapos.backends.fake_replies import FakeDraw, constrained_reply
from swapos.backends.fake_script import FakeModelScript, Fault
from swapos.backends.fake_slots import Lockstep
from swapos.backends.stops import StopStream
from swapos.clock import Clock
from swapos.data.generation import GenerationStats, StopReason
from swapos.data.prefix import PrefixState
from swapos.data.residency import Offload
from swapos.data.sampling import SamplingParams
from swapos.errors import GenerationError
from swapos.models.spec import ModelSpec
from swapos.policies.draws import curve_from_ratios
from swapos.policies.slots import step_width
from swapos.policies.tokens import can_cut_back, common_prefix_len


class FakeHost(Protocol):
    """What a fake model uses of its backend: the clock, the records of what it was asked
    (``prompts``, ``params``, ``generations`` per model), its faults, the decode slowdown
    while a load runs, and the bookkeeping of a close."""

    clock: Clock
    prompts: list[tuple[str, str]]
    params: list[tuple[str, SamplingParams]]
    generations: dict[str, int]

    def fault(self, kind: Fault) -> bool: ...

    async def stall(self, kind: Fault) -> None: ...

    def slowdown(self) -> float: ...

    def closed(self, model: FakeModel) -> None: ...


class FakeModel:
    """A loaded fake model; tokens are characters (so prefixes line up exactly)."""

    def __init__(
        self,
        backend: FakeHost,
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
            FakeDraw(i, p, replies[min(done + i, len(replies) - 1)]) for i, p in enumerate(draws)
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
            self._backend.closed(self)


def _lockstep(backend: FakeHost, spec: ModelSpec, script: FakeModelScript) -> Lockstep:
    """The slots of a fake model: a step of ``k`` costs ``token_s`` times the script's
    ``draw_step_cost`` at ``k`` (1.0 for every ``k`` when it scripts none)."""
    costs = script.draw_step_cost or (1.0,)

    def step_s(k: int) -> float:
        return script.token_s * costs[min(k, len(costs)) - 1] / backend.slowdown()

    width = functools.partial(step_width, curve_from_ratios(script.draw_step_cost))
    return Lockstep(backend.clock, spec.slots, step_s=step_s, width=width)
