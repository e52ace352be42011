"""The result records of docs/timings.md: what a phase, a task and a run report."""

from __future__ import annotations

import msgspec


class PhaseRecord(msgspec.Struct, kw_only=True):
    """One phase of one task. Times in seconds; see ``docs/timings.md`` for each field."""

    task_id: str
    phase_id: str
    phase: str
    model: str | None = None
    attempt: int = 0
    started_t: float = 0.0
    load_s: float = 0.0
    load_hidden_s: float = 0.0
    evict_s: float = 0.0
    ttft_s: float = 0.0
    prompt_tokens: int = 0
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    kv_restored_tokens: int = 0
    kv_servable_tokens: int = 0
    tokens: int = 0
    gen_s: float = 0.0
    tok_s: float = 0.0
    hit_cap: bool = False
    total_s: float = 0.0
    peak_rss_bytes: int = 0
    outcome: str = ""
    error: str | None = None
    draft_rule: str = ""
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_steps: int = 0


class TaskResult(msgspec.Struct, kw_only=True):
    """One run of a task, with its phases. ``run_id`` tells apart runs of one ``task_id``."""

    task_id: str
    run_id: str = ""
    category: str = ""
    passed: bool = False
    pass_at_1: bool = False
    iterations: int = 0
    tests_passed: int = 0
    tests_total: int = 0
    wall_clock_s: float = 0.0
    error: str | None = None
    passed_attempt: int = 0
    grades: int = 0
    phases: list[PhaseRecord] = msgspec.field(default_factory=list)


class CategoryStats(msgspec.Struct, kw_only=True):
    tasks: int = 0
    passed: int = 0
    pass_rate: float = 0.0


class RunInfo(msgspec.Struct, kw_only=True):
    """What a run summary holds beyond its tasks: header facts and run-wide counters."""

    run_at: str = ""
    mode: str = ""
    profile: str = ""
    models: list[str] = msgspec.field(default_factory=list)
    budget_bytes: int = 0
    overhead_bytes: int = 0  # the process's fixed share of a process budget (0: none)
    host: dict[str, str] = msgspec.field(default_factory=dict)
    wall_clock_s: float = 0.0
    loads: int = 0
    evictions: int = 0
    kv_hits: int = 0
    kv_misses: int = 0
    kv_saves: int = 0
    kv_yielded: int = 0  # KV RAM-tier states dropped to make room for models (the budget)


class RunSummary(RunInfo, kw_only=True):
    """A whole run: its :class:`RunInfo`, aggregates over its tasks, then the tasks
    themselves."""

    tasks_total: int = 0
    tasks_passed: int = 0
    pass_rate: float = 0.0
    pass_at_1: float = 0.0
    retry_rescued: int = 0
    retry_rescue_rate: float = 0.0
    draw_rescued: int = 0
    per_category: dict[str, CategoryStats] = msgspec.field(default_factory=dict)
    mean_wall_clock_s: float = 0.0
    mean_wall_passed_s: float = 0.0  # of the tasks that passed in the end
    mean_wall_failed_s: float = 0.0  # of the tasks that failed in the end
    failed_wall_share: float = 0.0  # their share of the tasks' summed wall
    phases_total: int = 0
    mean_load_s: float = 0.0
    mean_evict_s: float = 0.0
    mean_ttft_s: float = 0.0
    total_load_s: float = 0.0
    total_load_hidden_s: float = 0.0
    total_evict_s: float = 0.0
    load_hidden_fraction: float = 0.0
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    kv_restored_tokens: int = 0
    kv_servable_tokens: int = 0
    kv_served_tokens: int = 0
    kv_served_share: float = 0.0
    peak_rss_bytes: int = 0
    peak_rss_of_budget: float = 0.0  # peak_rss_bytes / budget_bytes (0: no finite budget)
    results: list[TaskResult] = msgspec.field(default_factory=list)
