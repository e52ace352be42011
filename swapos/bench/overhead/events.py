"""The synthetic event stream the overhead bench feeds the Recorder: events as a run emits
them, with realistic field values, built without running anything."""

from __future__ import annotations

from typing import Any

from swapos.data.generation import GenerationStats
from swapos.messages.events import (
    AnyEvent,
    FirstToken,
    GenerationFinished,
    GenerationProgress,
    GenerationStarted,
    KVMiss,
    KVSaved,
    LeaseGranted,
    LeaseReleased,
    ModelLoaded,
    ModelLoadStarted,
    PhaseFinished,
    PhaseStarted,
    ReservationMade,
    SchedulePublished,
    TaskFinished,
    TaskStarted,
)

PROGRESS_PER_PHASE = 32
"""A 256-token generation, reported every 8 tokens."""

TASK_PHASES = 4
"""Phases per task of the workload."""


def phase_events(n_events: int) -> list[AnyEvent]:
    """``n_events`` events as a run emits them: tasks of 4 phases, each a load, a lease and
    a generation with its progress events (45 events a phase)."""
    out: list[AnyEvent] = []
    t, k = 0.0, 0
    while len(out) < n_events:
        tid = f"task-{k // TASK_PHASES}"
        if k % TASK_PHASES == 0:
            out.append(TaskStarted(t=t, task_id=tid, category="bugfix"))
        out += _one_phase(t, tid, f"ph-{k}", ("reasoner", "coder")[k % 2])
        t += 1.0
        k += 1
        if k % TASK_PHASES == 0:
            out.append(TaskFinished(t=t, task_id=tid, passed=True, iterations=1))
    return out[:n_events]


def _one_phase(t: float, tid: str, pid: str, model: str) -> list[AnyEvent]:
    ids: dict[str, Any] = {"task_id": tid, "phase_id": pid, "model": model}
    return [
        PhaseStarted(t=t, phase="code", **ids),
        SchedulePublished(t=t + 0.001, task_id=tid, models=[model, "coder"]),
        *_load_events(t, pid, model),
        LeaseGranted(
            t=t + 0.2,
            lease_id=f"lease-{pid}",
            load_s=0.198,
            evict_s=0.0,
            load_hidden_s=0.0,
            joined=False,
            **ids,
        ),
        *_generation_events(t, pid, ids),
        KVSaved(t=t + 0.91, model=model, tokens=300, nbytes=4_000_000),
        LeaseReleased(t=t + 0.92, model=model, lease_id=f"lease-{pid}"),
        PhaseFinished(t=t + 0.92, peak_rss_bytes=812_345_678, **ids),
    ]


def _load_events(t: float, pid: str, model: str) -> list[AnyEvent]:
    """A cold load of ``model`` for phase ``pid``: the reservation, the start, the end."""
    return [
        ReservationMade(
            t=t + 0.002,
            model=model,
            request_id=f"rsv-{pid}",
            nbytes=300_000_000,
            urgent=True,
            victims=[],
            cancel=[],
            used_bytes=300_000_000,
            budget_bytes=1_000_000_000,
        ),
        ModelLoadStarted(t=t + 0.002, model=model, speculative=False, estimate_bytes=300_000_000),
        ModelLoaded(
            t=t + 0.2,
            model=model,
            load_s=0.198,
            speculative=False,
            estimate_bytes=300_000_000,
            measured_bytes=287_654_321,
        ),
    ]


def _generation_events(t: float, pid: str, ids: dict[str, Any]) -> list[AnyEvent]:
    """A 256-token generation of phase ``pid`` that missed the KV cache."""
    gen = {**ids, "request_id": f"gen-{pid}"}
    return [
        GenerationStarted(t=t + 0.201, prompt_chars=1834, **gen),
        KVMiss(t=t + 0.202, request_id=f"kv-{pid}", prompt_tokens=412, reason="no saved prefix"),
        FirstToken(t=t + 0.25, ttft_s=0.049, **gen),
        *(
            GenerationProgress(t=t + 0.25 + i * 0.02, tokens=8 * i, text_tail="    return x", **gen)
            for i in range(1, PROGRESS_PER_PHASE + 1)
        ),
        GenerationFinished(
            t=t + 0.9,
            stats=GenerationStats(
                prompt_tokens=412,
                prefill_tokens=412,
                kv_restored_tokens=0,
                prefill_s=0.045,
                ttft_s=0.049,
                tokens=256,
                gen_s=0.65,
                stop_reason="length",
            ),
            **gen,
        ),
    ]
