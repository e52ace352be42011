"""``python -m swapos.run``: bad input is a clear error (exit 2), never a traceback."""

from __future__ import annotations

import io
from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from swapos.console import LiveStatus, print_task_summary
from swapos.messages.events import GradeFinished, PhaseFinished, PhaseStarted, RouterDecided
from swapos.records.schema import PhaseRecord, TaskResult
from swapos.run import EXIT_ERROR, main

MARKUP = "[/bold] [red]x[/] [/"
"""Text rich would read as (broken) markup."""


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_max_attempts_below_one_is_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--max-attempts", value])
    assert exc.value.code == 2
    assert "--max-attempts" in capsys.readouterr().err


def test_an_out_that_is_a_file_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "taken"
    out.write_text("a file")
    assert main(["--out", str(out)]) == EXIT_ERROR
    assert "cannot write the results" in capsys.readouterr().out


def test_a_model_that_is_not_gguf_is_refused_before_any_phase(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_text("not a model, but long enough to have a header " * 8)
    profile = tmp_path / "p.toml"
    profile.write_text(f'[models.coder]\npath = "{model}"\n[roles]\ncode = "coder"\n')
    out = tmp_path / "out"
    assert main(["--profile", str(profile), "--out", str(out)]) == EXIT_ERROR
    assert not (out / "events.jsonl").exists()  # no system was opened, no phase ran
    result = msgspec.json.decode((out / "result.json").read_bytes())
    assert "not a GGUF file" in result["error"]


def test_text_that_looks_like_markup_is_printed_as_text() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=200)
    status = LiveStatus(console)
    status.on_event(PhaseStarted(t=0.0, task_id=MARKUP, phase="grade"))
    status.on_event(RouterDecided(t=0.1, decision="route", text=MARKUP))
    status.on_event(
        GradeFinished(
            t=0.2, outcome="fail", passed=False, tests_passed=0, tests_total=1, duration_s=0.1,
            reason=MARKUP,
        )
    )  # fmt: skip
    status.on_event(PhaseFinished(t=0.3, outcome="error", error=MARKUP))
    result = TaskResult(
        task_id=MARKUP,
        category=MARKUP,
        error=MARKUP,
        phases=[PhaseRecord(task_id=MARKUP, phase_id="p", phase=MARKUP, model=MARKUP)],
    )
    print_task_summary(console, result)
    assert buf.getvalue().count(MARKUP) >= 5


def test_the_summary_says_the_peak_rss_against_the_budget() -> None:
    phases = [
        PhaseRecord(task_id="t", phase_id=f"p{i}", phase="code", model="m", peak_rss_bytes=b)
        for i, b in enumerate((700 << 20, 1545 << 20))
    ]
    result = TaskResult(task_id="t", category="bugfix", phases=phases)
    out = []
    for budget in (1536 << 20, 0):
        buf = io.StringIO()
        print_task_summary(Console(file=buf, width=200), result, budget_bytes=budget)
        out.append(buf.getvalue())
    assert "peak RSS 1545 MiB of 1536 MiB budget (1.01x)" in out[0]
    assert "peak RSS" not in out[1]  # no finite budget: nothing to compare with


def test_models_with_no_measured_decode_costs_are_named_with_what_measures_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swapos.models.spec import ModelSpec
    from swapos.run import _say_unmeasured

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "m.gguf").write_bytes(b"GGUF not really")
    specs = {
        "m": ModelSpec(name="m", path=str(tmp_path / "m.gguf")),
        "off": ModelSpec(name="off", path=str(tmp_path / "m.gguf"), draft="off"),
    }
    buf = io.StringIO()
    _say_unmeasured(Console(file=buf, width=300), specs, "tiny")
    said = buf.getvalue()
    assert "not measured on this machine for m:" in said
    assert "`swapos bench decode --profile tiny`" in said
    buf = io.StringIO()
    _say_unmeasured(Console(file=buf, width=300), {"off": specs["off"]}, "tiny")
    assert buf.getvalue() == ""
