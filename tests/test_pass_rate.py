"""The pass-rate estimate that decides whether a grade window schedules the fixer."""

from __future__ import annotations

from swapos.policies.outcomes import PassRate


def test_no_grades_is_an_even_chance_and_not_an_expected_pass() -> None:
    rate = PassRate()
    assert rate.estimate == 0.5 and not rate.expects_pass()


def test_the_estimate_follows_the_grades() -> None:
    rate = PassRate()
    rate.observe(passed=True)
    assert rate.expects_pass()  # 2/3
    rate.observe(passed=False)
    assert not rate.expects_pass()  # 2/4
    for _ in range(3):
        rate.observe(passed=False)
    assert rate.estimate == 2 / 7 and (rate.grades, rate.passes) == (5, 1)
