"""Per-phase, per-task and per-run records (docs/timings.md), and the pure aggregation that builds
them from events. The Recorder uses it live; replay uses it on a log: same code, same numbers."""
