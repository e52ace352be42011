"""The draws bench on the fake backend and a FakeClock: walls both ways, their ratio and the
target record; its command line."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.bench.cli import build_parser
from swapos.bench.draws.measure import WALL_RATIO_LIMIT, measure_prompt, summarize
from swapos.data.sampling import SamplingParams
from swapos.models.spec import ModelSpec
from swapos.testing import FakeClock

LENGTHS = (6, 2, 4, 7)


@pytest.mark.parametrize(("cost", "ratio"), [((1.0,), 7 / 19), ((1.0, 1.6, 2.2, 3.0), 1.46 / 1.9)])
async def test_draws_bench_times_both_ways_on_the_clock(
    cost: tuple[float, ...], ratio: float
) -> None:
    script = FakeModelScript(reply="a b c d e f g h", token_s=0.1, load_s=0.0, draw_step_cost=cost)
    params = [SamplingParams(max_tokens=n, temperature=0.8, seed=n) for n in LENGTHS]
    with anyio.fail_after(5):
        clock = FakeClock()
        async with clock.autojump():
            model = await FakeBackend(clock, {"m": script}).load(ModelSpec(name="m", path="-"))
            runs = [
                await measure_prompt(
                    model,
                    "t",
                    [1, 2],
                    params,
                    restore=None,
                    round_=0,
                    side_first=side_first,
                    now=clock.now,
                )
                for side_first in (False, True)
            ]
    assert runs[1].first == "side"
    for run in runs:
        assert run.turn_s == pytest.approx(1.9)  # 19 tokens one after another
        assert run.turn_tokens == run.side_tokens == 19
        assert run.side_s == pytest.approx(ratio * 1.9)
        assert all(d.same_text for d in run.draws)
    summary = summarize(runs, draws=4)
    assert summary.ratio == pytest.approx(ratio)
    assert summary.same_text_share == 1.0
    [target] = summary.targets
    assert (target.value, target.limit, target.met) == (
        pytest.approx(ratio),
        WALL_RATIO_LIMIT,
        ratio <= WALL_RATIO_LIMIT,
    )


def test_no_runs_meet_no_target() -> None:
    assert not summarize([], draws=6).targets[0].met


def test_draws_is_a_bench_subcommand_with_a_curve() -> None:
    args = build_parser().parse_args(["draws", "--prompts", "1", "--curve", "2:3.1,6:4.1"])
    assert (args.prompts, args.draws, args.curve) == (1, 6, {2: 3.1, 6: 4.1})
    with pytest.raises(SystemExit):
        build_parser().parse_args(["draws", "--curve", "1:1.0"])
