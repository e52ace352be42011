"""Build per-phase, per-task and per-run records from events: one pure fold.

The Recorder feeds it live; replay feeds it a log. Both therefore report the same numbers,
to the last bit (msgspec writes floats in shortest round-trip form).
"""

from __future__ import annotations

from swapos.data.generation import GenerationStats
from swapos.messages.events import (
    AnyEvent,
    GenerationFinished,
    GradeFinished,
    KVDropped,
    KVHit,
    KVMiss,
    KVRestoreFailed,
    KVSaved,
    LeaseGranted,
    ModelEvicted,
    ModelLoaded,
    PhaseFinished,
    PhaseStarted,
    RunFinished,
    RunStarted,
    TaskFinished,
    TaskStarted,
)
from swapos.records.schema import PhaseRecord, RunInfo, RunSummary, TaskResult
from swapos.records.summary import summarize


class Aggregator:
    """Folds events into records. Feed events in log order; read at any time.

    Task records are keyed by run id (:func:`run_key`), never by task id: one task id may
    run many times in a log, even at once, and each run keeps its own phases.
    """

    def __init__(self) -> None:
        self.header: RunStarted | None = None
        self.tasks: dict[str, TaskResult] = {}
        """Every run's record, by run id."""
        self.phases: dict[str, PhaseRecord] = {}
        self._task_t0: dict[str, float] = {}
        self.finished_tasks: list[str] = []
        """Run ids of the finished runs, in the order they finished."""
        self.loads = self.evictions = 0
        self.kv_hits = self.kv_misses = self.kv_saves = 0
        self.kv_yielded = 0
        self.last_t = 0.0
        self.run_finished_t: float | None = None

    def feed(self, ev: AnyEvent) -> None:
        self.last_t = max(self.last_t, ev.t)
        match ev:
            case RunStarted():
                self.header = ev
            case RunFinished():
                self.run_finished_t = ev.t
            case TaskStarted(task_id=str(tid)):
                rid = run_key(ev)
                self._task_t0[rid] = ev.t
                self.tasks[rid] = TaskResult(task_id=tid, run_id=rid, category=ev.category)
            case TaskFinished(task_id=str(tid)):
                self._finish_task(tid, run_key(ev), ev)
            case PhaseStarted(task_id=str(tid), phase_id=str(pid)):
                self._start_phase(tid, run_key(ev), pid, ev)
            case LeaseGranted(phase_id=str(pid)) if pid in self.phases:
                record = self.phases[pid]
                record.load_s, record.evict_s = ev.load_s, ev.evict_s
                record.load_hidden_s = ev.load_hidden_s
            case GenerationFinished(phase_id=str(pid)) if pid in self.phases:
                _apply_generation(self.phases[pid], ev.stats)
            case GradeFinished(phase_id=str(pid)) if pid in self.phases:
                self.phases[pid].outcome = ev.outcome
            case PhaseFinished(phase_id=str(pid)) if pid in self.phases:
                record = self.phases[pid]
                record.total_s = ev.t - record.started_t
                record.outcome = record.outcome or ev.outcome
                record.error, record.peak_rss_bytes = ev.error, ev.peak_rss_bytes
            case ModelLoaded():
                self.loads += 1
            case ModelEvicted() if ev.reason != "shutdown":
                self.evictions += 1
            case KVHit():
                self.kv_hits += 1
            case KVMiss():
                self.kv_misses += 1
            case KVRestoreFailed():  # the hit's state was not used: count its lookup a miss
                self.kv_hits -= 1
                self.kv_misses += 1
            case KVSaved():
                self.kv_saves += 1
            case KVDropped(reason=reason) if reason.startswith("yielded"):
                self.kv_yielded += 1  # a RAM-tier state dropped to make room for a model
            case _:
                pass

    def _finish_task(self, tid: str, rid: str, ev: TaskFinished) -> None:
        task = self.tasks.setdefault(rid, TaskResult(task_id=tid, run_id=rid))
        task.passed, task.pass_at_1 = ev.passed, ev.pass_at_1
        task.iterations, task.error = ev.iterations, ev.error
        task.tests_passed, task.tests_total = ev.tests_passed, ev.tests_total
        task.passed_attempt, task.grades = ev.passed_attempt, ev.grades
        task.wall_clock_s = ev.t - self._task_t0.get(rid, ev.t)
        self.finished_tasks.append(rid)

    def _start_phase(self, tid: str, rid: str, pid: str, ev: PhaseStarted) -> None:
        record = PhaseRecord(
            task_id=tid,
            phase_id=pid,
            phase=ev.phase,
            model=ev.model,
            attempt=ev.attempt,
            started_t=ev.t,
        )
        self.phases[pid] = record
        self.tasks.setdefault(rid, TaskResult(task_id=tid, run_id=rid)).phases.append(record)

    def summary(self) -> RunSummary:
        """The run as of the events fed so far (finished tasks only)."""
        h = self.header
        info = RunInfo(
            run_at=h.run_at if h else "",
            mode=h.mode if h else "",
            profile=h.profile if h else "",
            models=list(h.models) if h else [],
            budget_bytes=h.budget_bytes if h else 0,
            overhead_bytes=h.overhead_bytes if h else 0,
            host=dict(h.host) if h else {},
            wall_clock_s=self.run_finished_t if self.run_finished_t is not None else self.last_t,
            loads=self.loads,
            evictions=self.evictions,
            kv_hits=self.kv_hits,
            kv_misses=self.kv_misses,
            kv_saves=self.kv_saves,
            kv_yielded=self.kv_yielded,
        )
        return summarize([self.tasks[t] for t in self.finished_tasks], info)


def run_key(ev: TaskStarted | TaskFinished | PhaseStarted) -> str:
    """The run a task-level event belongs to: its ``run_id`` (logs before schema 3 are
    upgraded on reading so that it is the task id); events built without one fall back to
    the task id."""
    return ev.run_id or ev.task_id or ""


def _apply_generation(record: PhaseRecord, stats: GenerationStats) -> None:
    record.ttft_s, record.tokens, record.gen_s = stats.ttft_s, stats.tokens, stats.gen_s
    record.prompt_tokens, record.prefill_tokens = stats.prompt_tokens, stats.prefill_tokens
    record.prefill_s, record.kv_restored_tokens = stats.prefill_s, stats.kv_restored_tokens
    record.kv_servable_tokens = stats.kv_servable_tokens
    record.draft_rule, record.drafted_tokens = stats.draft_rule, stats.drafted_tokens
    record.accepted_tokens, record.verify_steps = stats.accepted_tokens, stats.verify_steps
    record.hit_cap = stats.hit_cap
    record.tok_s = (stats.tokens - 1) / stats.gen_s if stats.tokens > 1 and stats.gen_s > 0 else 0.0
    record.outcome = "cap" if stats.hit_cap else stats.stop_reason
