"""Human-readable sizes and durations for the CLI."""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
STEP = 1024


def format_size(num_bytes: float) -> str:
    """``num_bytes`` in the largest binary unit that keeps the number below 1024,
    with one decimal (bytes are shown as a whole number)."""
    if num_bytes < 0:
        return "-" + format_size(-num_bytes)
    if num_bytes < STEP:
        return f"{int(num_bytes)} B"
    value = float(num_bytes)
    unit = 0
    while value >= STEP and unit < len(UNITS) - 1:
        value /= STEP
        unit += 1
    if round(value, 1) >= STEP and unit < len(UNITS) - 1:
        value /= STEP
        unit += 1
    return f"{value:.1f} {UNITS[unit]}"


def format_duration(seconds: float) -> str:
    """``seconds`` as ``1h 02m 03s`` / ``2m 03s`` / ``3.5s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s"


def progress(done: float, total: float) -> str:
    """``12.0 MiB / 100.0 MiB (12%)``."""
    pct = 0 if total <= 0 else int(100 * done / total)
    return f"{format_size(done)} / {format_size(total)} ({pct}%)"
