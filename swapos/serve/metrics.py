"""Counters of the served requests and their Prometheus text exposition (``GET /metrics``).

The text format is small enough to write by hand: ``# HELP`` and ``# TYPE`` lines, then one
``name{label="value"} number`` sample per line (label values escaped: backslash, quote,
newline). See https://prometheus.io/docs/instrumenting/exposition_formats/.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from swapos.records.schema import PhaseRecord

Labels = tuple[tuple[str, str], ...]


@dataclass
class _ModelCounters:
    requests_ok: int = 0
    requests_failed: int = 0
    requests_cancelled: int = 0
    queue_wait_s: float = 0.0
    load_s: float = 0.0
    load_hidden_s: float = 0.0
    evict_s: float = 0.0
    paid_loads: int = 0
    hidden_loads: int = 0
    prompt_tokens: int = 0
    prefill_tokens: int = 0
    kv_restored_tokens: int = 0
    tokens: int = 0
    decode_s: float = 0.0


class Metrics:
    """Per-model request counters, fed by the routes after each request."""

    def __init__(self) -> None:
        self._models: dict[str, _ModelCounters] = defaultdict(_ModelCounters)

    def observe(self, model: str, record: PhaseRecord, *, queue_wait_s: float) -> None:
        """A request that ran (its phase record), successful or not."""
        c = self._models[model]
        if record.outcome == "cancelled":
            c.requests_cancelled += 1
        elif record.error:
            c.requests_failed += 1
        else:
            c.requests_ok += 1
        c.queue_wait_s += queue_wait_s
        c.load_s += record.load_s
        c.load_hidden_s += record.load_hidden_s
        c.evict_s += record.evict_s
        c.paid_loads += record.load_s > 0
        c.hidden_loads += record.load_hidden_s > 0
        c.prompt_tokens += record.prompt_tokens
        c.prefill_tokens += record.prefill_tokens
        c.kv_restored_tokens += record.kv_restored_tokens
        c.tokens += record.tokens
        c.decode_s += record.gen_s

    def observe_cancelled(self, model: str, *, queue_wait_s: float) -> None:
        """A request whose client went away before its phase record was read."""
        c = self._models[model]
        c.requests_cancelled += 1
        c.queue_wait_s += queue_wait_s

    def render(
        self,
        *,
        system: Mapping[str, float],
        queues: Mapping[str, int],
        running: Mapping[str, int] | None = None,
        slots: Mapping[str, int] | None = None,
    ) -> str:
        """The exposition text: per-model counters, queue depths, running requests and
        slots, and the ``system`` gauges and counters (loads, evictions, prefetches,
        budget)."""
        out = Exposition()
        models = sorted(self._models)
        per = self._models
        out.metric(
            "swapos_requests_total",
            "counter",
            "Requests served, by model and outcome.",
            [
                ((("model", m), ("outcome", o)), float(n))
                for m in models
                for o, n in (
                    ("ok", per[m].requests_ok),
                    ("error", per[m].requests_failed),
                    ("cancelled", per[m].requests_cancelled),
                )
            ],
        )
        per_model = [
            ("swapos_queue_wait_seconds_total", "counter", "Seconds requests waited in the queue.",
             "queue_wait_s"),
            ("swapos_load_seconds_total", "counter",
             "Load seconds requests paid on their critical path.", "load_s"),
            ("swapos_load_hidden_seconds_total", "counter",
             "Load seconds done off the critical path (prefetch).", "load_hidden_s"),
            ("swapos_evict_seconds_total", "counter",
             "Seconds requests waited for evictions.", "evict_s"),
            ("swapos_paid_loads_total", "counter", "Requests that paid a load.", "paid_loads"),
            ("swapos_hidden_loads_total", "counter",
             "Requests whose model load was (partly) hidden by a prefetch.", "hidden_loads"),
            ("swapos_prompt_tokens_total", "counter", "Prompt tokens.", "prompt_tokens"),
            ("swapos_prefill_tokens_total", "counter", "Prompt tokens prefilled.",
             "prefill_tokens"),
            ("swapos_kv_restored_tokens_total", "counter",
             "Prompt tokens restored from the KV prefix cache.", "kv_restored_tokens"),
            ("swapos_generated_tokens_total", "counter", "Generated tokens.", "tokens"),
            ("swapos_decode_seconds_total", "counter", "Seconds spent decoding.", "decode_s"),
        ]  # fmt: skip
        for name, kind, help_, attr in per_model:
            out.metric(
                name, kind, help_, [((("model", m),), float(getattr(per[m], attr))) for m in models]
            )
        out.metric(
            "swapos_decode_tokens_per_second",
            "gauge",
            "Decode rate over all requests so far (tokens after the first / decode seconds).",
            [
                ((("model", m),), per[m].tokens / per[m].decode_s)
                for m in models
                if per[m].decode_s > 0
            ],
        )
        out.metric(
            "swapos_queue_depth",
            "gauge",
            "Requests waiting, by model.",
            [((("model", m),), float(n)) for m, n in sorted(queues.items())],
        )
        out.metric(
            "swapos_running_requests",
            "gauge",
            "Requests running (admitted, not yet ended), by model.",
            [((("model", m),), float(n)) for m, n in sorted((running or {}).items())],
        )
        out.metric(
            "swapos_slots",
            "gauge",
            "Requests of the model decoded side by side (its slots).",
            [((("model", m),), float(n)) for m, n in sorted((slots or {}).items())],
        )
        for name, value in sorted(system.items()):
            kind = "counter" if name.endswith("_total") else "gauge"
            out.metric(name, kind, SYSTEM_HELP.get(name, name), [((), value)])
        return out.text()


SYSTEM_HELP = {
    "swapos_model_loads_total": "Model loads completed (urgent and prefetched).",
    "swapos_model_evictions_total": "Models evicted.",
    "swapos_prefetch_loads_total": "Speculative (prefetch) loads completed.",
    "swapos_prefetch_warms_total": "Page-cache warm-ups done by the Prefetcher.",
    "swapos_budget_bytes": "The memory budget.",
    "swapos_used_bytes": "Bytes of the budget in use (resident and reserved models).",
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))


class Exposition:
    """Builds the text format, one metric family at a time."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def metric(
        self, name: str, kind: str, help_: str, samples: Iterable[tuple[Labels, float]]
    ) -> None:
        self._lines.append(f"# HELP {name} {help_}")
        self._lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            self._lines.append(
                f"{name}{{{body}}} {_number(value)}" if body else f"{name} {_number(value)}"
            )

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
