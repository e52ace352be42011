"""``bench decode`` without a model: recorded phases from capsules, the cost curve's ratios,
the costs it hands the policy, its targets, and where the decode loop finds the costs."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from swapos.backends.llama.cost_curve import Curve, CurvePoint
from swapos.backends.llama.draft_costs import cache_path, costs_for, save_cached
from swapos.bench import cli
from swapos.bench.decode.command import ModelReport, targets
from swapos.bench.decode.measure import RuleStats, SpeedCase, choose_costs
from swapos.bench.decode.replay import Recorded, find_capsules, recorded_phases, speed_pool
from swapos.capsule.schema import (
    Artifact,
    Feedback,
    encode_capsule,
    new_capsule,
    with_artifact,
    with_feedback,
    with_plan,
)
from swapos.data.generation import DraftCosts, GenerationStats
from swapos.messages.events import GenerationFinished, PhaseStarted, TaskStarted
from swapos.models.digests import file_digest
from swapos.models.spec import ModelSpec
from swapos.records.aggregate import Aggregator
from swapos.records.schema import PhaseRecord


def _capsule_file(folder: Path) -> Path:
    cap = new_capsule(task_id="bugfix_is_even", category="bugfix", goal="Fix is_even.")
    cap = with_plan(cap, ["1. use n % 2"])
    cap = with_artifact(cap, Artifact(attempt=1, phase="code", code="def is_even(n): 1\n"))
    cap = with_feedback(cap, Feedback(attempt=1, source="grader", text="1 failed"))
    cap = with_feedback(cap, Feedback(attempt=1, source="critic", text="return n % 2 == 0"))
    cap = with_artifact(cap, Artifact(attempt=2, phase="code", code="def is_even(n): 2\n"))
    path = folder / "overlap-pipeline" / "capsules" / "bugfix_is_even.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_capsule(cap))
    return path


def test_each_attempt_and_critic_note_is_a_recorded_phase_with_what_came_before(
    tmp_path: Path,
) -> None:
    written = _capsule_file(tmp_path)
    assert find_capsules([tmp_path]) == [written]
    cases = recorded_phases(find_capsules([tmp_path]))
    kinds = [(c.kind, c.attempt) for c in cases]
    assert kinds == [("reason", 0), ("code", 1), ("critic", 1), ("fix", 2)]
    plan, first, critic, fix = cases
    assert plan.output == "1. use n % 2" and "def is_even(n: int) -> bool" in plan.context
    assert "1. use n % 2" in first.context
    assert first.context.startswith("Fix is_even.")
    assert "def is_even(n: int) -> bool" in first.context  # the builtin task's starter
    assert "def is_even(n): 1" not in first.context
    assert "def is_even(n): 1" in critic.context and "1 failed" in critic.context
    assert critic.output == "return n % 2 == 0"
    assert "return n % 2 == 0" in fix.context
    assert fix.output == "def is_even(n): 2\n"


def test_a_phase_two_arms_recorded_alike_is_one_case(tmp_path: Path) -> None:
    written = _capsule_file(tmp_path)
    twin = tmp_path / "overlap-pipeline:knob=1" / "capsules" / written.name
    twin.parent.mkdir(parents=True)
    twin.write_bytes(written.read_bytes())
    assert len(find_capsules([tmp_path])) == 2
    once = recorded_phases([written])
    assert recorded_phases(find_capsules([tmp_path])) == once


def test_speed_cases_take_the_longest_answer_of_each_task_before_a_second_of_any() -> None:
    def case(task: str, n: int, kind: str = "fix") -> Recorded:
        return Recorded(task_id=task, kind=kind, attempt=n, context="c", output="x" * n)

    cases = [case("a", 90), case("a", 80), case("a", 70), case("b", 60), case("c", 50),
             case("b", 40), case("d", 99, kind="code")]  # fmt: skip
    got = [(c.task_id, len(c.output)) for c in speed_pool(cases, "fix")]
    assert got == [("a", 90), ("b", 60), ("c", 50), ("a", 80), ("a", 70), ("b", 40)]


def test_the_curve_fills_every_batch_size_between_measured_ones() -> None:
    curve = Curve(
        context_tokens=256, repeats=3, ms_per_token=50.0, decode_tok_s=20.0, prefill_tok_s=90.0,
        points=[CurvePoint(tokens=1, ms=50, ratio=1.0), CurvePoint(tokens=2, ms=100, ratio=2.0),
                CurvePoint(tokens=4, ms=150, ratio=3.0)],
    )  # fmt: skip
    assert curve.verify_ratio() == (1.0, 2.0, 2.5, 3.0)


def _stats(n: int, k: int, kind: str, accepted: int, cost: float) -> RuleStats:
    return RuleStats(
        rule=f"lookup{n}-3", ngram_min=n, k=k, kind=kind, cases=1, tokens=100, steps=50,
        accepted=accepted, tested=100, cost=cost,
    )  # fmt: skip


def test_the_policy_gets_the_acceptance_of_the_rule_that_predicts_most() -> None:
    stats = [
        _stats(1, 4, "fix", 60, 80.0), _stats(1, 8, "fix", 70, 70.0),
        _stats(2, 4, "fix", 80, 90.0), _stats(2, 8, "fix", 85, 95.0),
        _stats(1, 8, "code", 40, 90.0), _stats(2, 8, "code", 50, 99.0),
    ]  # fmt: skip
    costs = choose_costs((1.0, 2.0), stats, source="test")
    assert costs.ngram_min == 1
    assert costs.acceptance == {"fix": 0.7, "code": 0.4, "prediction": 0.7}
    assert choose_costs((1.0,), [], source="x").acceptance == {}


def _speed(kind: str, plain: float, draft: float, predicted: float, same: bool) -> SpeedCase:
    return SpeedCase(
        task_id="t", kind=kind, prompt_tokens=10, tokens=50, plain_s=plain, draft_s=draft,
        measured=plain / draft, predicted=predicted, same_text=same, drafted=10, accepted=5,
        verify_steps=2,
    )  # fmt: skip


def test_targets_say_what_was_met_and_what_was_missed() -> None:
    curve = Curve(context_tokens=1, repeats=1, ms_per_token=1, decode_tok_s=1, prefill_tok_s=1,
                  points=[CurvePoint(tokens=1, ms=1, ratio=1.0)])  # fmt: skip
    rep = ModelReport(
        curve=curve, rules=[], costs=DraftCosts(verify_ratio=(1.0,)), saved=None,
        speed=[_speed("fix", 12.0, 10.0, 1.2, True), _speed("code", 10.0, 10.5, 1.0, False)],
    )  # fmt: skip
    got = {(t.name, t.condition): t for t in targets({"large": rep}, "large")}
    assert got["never slower: fix", "large"].met
    assert not got["never slower: code", "large"].met  # 10 / 10.5 < 0.97
    assert got["fix prompts decode >= 1.12x plain", "large"].value == pytest.approx(1.2)
    assert got["greedy text differs from plain (share)", "large"].value == 0.5
    gap = got["predicted speed-up within 10% of measured", "large"]
    assert gap.value == pytest.approx(abs((22 / 20.5) / (22 / 20) - 1))
    assert gap.met


def test_decode_is_a_bench_subcommand() -> None:
    args = cli.build_parser().parse_args(["decode", "--models", "small", "--sizes", "2,4"])
    assert args.sizes == [2, 4]
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["decode", "--sizes", "0"])


def test_the_decode_loop_reads_cached_pinned_or_no_costs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF not really")
    spec = ModelSpec(name="m", path=str(model), n_threads=2)
    assert costs_for(spec) is None  # never measured: never draft
    costs = DraftCosts(verify_ratio=(1.0, 2.0), acceptance={"fix": 0.8})
    saved = save_cached(spec, costs)
    assert saved == cache_path(file_digest(str(model)), 2)
    got = costs_for(spec)
    assert got is not None and got.acceptance == {"fix": 0.8} and got.source == str(saved)
    assert costs_for(msgspec.structs.replace(spec, n_threads=1)) is None  # other threads
    assert costs_for(msgspec.structs.replace(spec, draft="off")) is None
    report = tmp_path / "decode-bench.json"
    pinned = DraftCosts(verify_ratio=(1.0, 1.1))
    report.write_bytes(msgspec.json.encode({"models": {"m": {"costs": pinned}}}))
    got = costs_for(msgspec.structs.replace(spec, draft=str(report)))
    assert got is not None and got.verify_ratio == (1.0, 1.1)
    report.write_text("{broken")
    assert costs_for(msgspec.structs.replace(spec, draft=str(report))) is None

    from swapos.backends.llama.draft_costs import unmeasured

    other = ModelSpec(name="o", path=str(tmp_path / "o.gguf"), n_threads=2)
    (tmp_path / "o.gguf").write_bytes(b"GGUF another")
    off = msgspec.structs.replace(other, name="off", draft="off")
    assert unmeasured([spec, other, off]) == ["o"]  # measured, never measured, turned off


def test_a_phase_record_says_what_drafting_did() -> None:
    stats = GenerationStats(
        prompt_tokens=10, prefill_tokens=10, kv_restored_tokens=0, prefill_s=1.0, ttft_s=1.0,
        tokens=40, gen_s=2.0, stop_reason="eos", draft_rule="lookup1-3", drafted_tokens=36,
        accepted_tokens=30, verify_steps=5,
    )  # fmt: skip
    agg = Aggregator()
    ids = {"task_id": "t", "phase_id": "p", "model": "m"}
    agg.feed(TaskStarted(t=0.0, task_id="t", run_id="r"))
    agg.feed(PhaseStarted(t=0.0, run_id="r", phase="code", attempt=2, **ids))
    agg.feed(GenerationFinished(t=3.0, stats=stats, **ids))
    record = agg.phases["p"]
    assert (record.draft_rule, record.drafted_tokens) == ("lookup1-3", 36)
    assert (record.accepted_tokens, record.verify_steps) == (30, 5)
    old = msgspec.json.decode(b'{"task_id":"t","phase_id":"p","phase":"code"}', type=PhaseRecord)
    assert (old.draft_rule, old.drafted_tokens) == ("", 0)  # records from before read as plain


@pytest.mark.real_model
def test_without_recorded_phases_the_curve_alone_is_measured_and_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh machine has no bench run to replay: ``bench decode`` still measures the cost
    curve (what draws side by side read) and saves it, without acceptance or speed cases."""
    from swapos.backends.llama.backend import LlamaBackend
    from swapos.bench.decode.command import run_bench
    from swapos.models.bundled import builtin_profile
    from swapos.models.resolve import model_specs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = cli.build_parser().parse_args(
        ["decode", "--profile", "tiny", "--models", "coder", "--sizes", "2,4", "--repeats", "1",
         "--context", "16", "--results", str(tmp_path / "none")]
    )  # fmt: skip
    said: list[str] = []
    report = run_bench(args, say=lambda *a: said.append(" ".join(map(str, a))))
    rep = report.models["coder"]
    assert len(rep.costs.verify_ratio) == 4 and rep.costs.acceptance == {}
    assert rep.speed == [] and rep.rules == [] and rep.saved is not None
    assert any("the cost curve only" in s for s in said)
    spec = model_specs(builtin_profile("tiny"))["coder"]
    assert set(LlamaBackend().draw_curve(spec)) == {2, 3, 4}  # what the draws policy reads


@pytest.mark.real_model
def test_each_speed_case_is_timed_the_rounds_asked_each_way_and_the_medians_compared(
    tmp_path: Path,
) -> None:
    """One short timing each way is noisier than the never-slower bound: with
    ``--speed-rounds`` each recorded prompt is decoded that many times plain and drafted,
    and the case holds the medians (and says how many rounds they are of)."""
    from swapos.bench.decode.command import run_bench

    _capsule_file(tmp_path / "run")
    args = cli.build_parser().parse_args(
        ["decode", "--profile", "tiny", "--models", "coder", "--sizes", "2", "--repeats", "1",
         "--context", "16", "--ks", "4", "--speed-rounds", "3", "--speed-tokens", "12",
         "--pair-cases", "0", "--no-save", "--results", str(tmp_path / "run")]
    )  # fmt: skip
    said: list[str] = []
    report = run_bench(args, say=lambda *a: said.append(" ".join(map(str, a))))
    speed = report.models["coder"].speed
    assert speed, "no speed case measured"
    for case in speed:
        assert case.rounds == 3 and case.plain_s > 0 < case.draft_s
        assert case.measured == pytest.approx(case.plain_s / case.draft_s)
    assert sum("(medians of 3)" in s for s in said) == len(speed)


def test_speed_rounds_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["decode", "--speed-rounds", "0"])
    assert "must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.real_model
def test_the_smaller_qwen_drafting_for_the_larger_is_measured_with_the_rules_verdict(
    tmp_path: Path,
) -> None:
    """The default profile's two Qwen models share a token table: ``bench decode`` decodes
    a recorded prompt on the 1.5B plain and drafted by the 0.5B, and says what it measured,
    what the rule predicts and the length the rule would choose."""
    from swapos.bench.decode.command import run_bench

    _capsule_file(tmp_path / "run")
    args = cli.build_parser().parse_args(
        ["decode", "--sizes", "2,4", "--repeats", "1", "--context", "16", "--ks", "4",
         "--speed-cases", "0", "--speed-tokens", "24", "--pair-lengths", "3", "--no-save",
         "--results", str(tmp_path / "run")]
    )  # fmt: skip
    report = run_bench(args, say=lambda *a: None)
    assert all(r.costs.step_s > 0 and r.costs.prefill_s_per_token > 0
               for r in report.models.values())  # fmt: skip
    assert report.pairs, "no pair measured"
    for case in report.pairs:
        assert (case.target, case.drafter, case.length) == ("large", "small", 3)
        assert case.same_text and case.drafted > 0 and case.plain_s > 0 < case.drafted_s
        assert 0.0 <= case.acceptance <= 1.0 and case.predicted > 0
