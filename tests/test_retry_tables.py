"""The retry policy's transition tables, walked: every state is reachable, every row is
well formed and fired by a row of ``tests/test_retry_policy.py``, and docs/architecture.md
draws the tables as they are."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from swapos.policies import draw_tables
from swapos.policies.retry import ACTIONS, GUARDS
from swapos.policies.retry_tables import (
    ATTEMPT,
    ATTEMPT_ENDS,
    ATTEMPT_START,
    DONE,
    ENTER,
    TASK,
    TASK_START,
    Transition,
)
from tests.test_retry_policy import ROWS, play

MACHINES = {
    "task": (TASK, TASK_START, (DONE,)),
    "attempt": (ATTEMPT, ATTEMPT_START, ATTEMPT_ENDS),
}


def reachable(rows: Sequence[Transition], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        at = todo.pop()
        for t in rows:
            if t.source == at and t.target not in seen:
                seen.add(t.target)
                todo.append(t.target)
    return seen


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_every_state_is_reachable_and_only_the_ends_have_no_way_out(name: str) -> None:
    rows, start, ends = MACHINES[name]
    states = {t.source for t in rows} | {t.target for t in rows}
    assert reachable(rows, start) == states
    assert states - {t.source for t in rows} == set(ends)


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_the_rows_of_a_state_and_event_end_with_the_one_without_a_guard(name: str) -> None:
    rows, _, _ = MACHINES[name]
    groups: dict[tuple[str, str], list[Transition]] = {}
    for t in rows:
        groups.setdefault((t.source, t.event), []).append(t)
    for (source, event), group in groups.items():
        *guarded, last = group
        assert not last.guard and all(t.guard for t in guarded), (source, event)
        assert len({t.guard for t in group}) == len(group), (source, event)  # no twin rows
    choices = {t.source for t in rows if t.event == ENTER}
    assert all(t.event == ENTER for t in rows if t.source in choices)  # a choice waits not


def test_every_guard_and_action_a_row_names_exists_and_every_one_is_named() -> None:
    rows = (*TASK, *ATTEMPT)
    assert {t.guard for t in rows} - {""} == set(GUARDS)
    assert {t.action for t in rows} - {""} == set(ACTIONS)


def test_each_end_of_an_attempt_moves_the_task_machine() -> None:
    assert {t.event for t in TASK if t.source == "attempting"} == set(ATTEMPT_ENDS)
    assert {t.source for t in TASK if t.target == "attempting"} == {"next_attempt"}


def test_the_rows_of_the_rule_tests_fire_every_transition() -> None:
    fired: set[Transition] = set()
    for _, setting, answers, _ in ROWS:
        fired |= play(answers, **setting).fired
    assert [t for t in (*TASK, *ATTEMPT) if t not in fired] == []


def test_docs_architecture_draws_the_tables_as_they_are() -> None:
    doc = draw_tables.DOC.read_text(encoding="utf-8")
    assert draw_tables.drawn(doc) == doc, "run: python -m swapos.policies.draw_tables"
    assert draw_tables.main(["--check"]) == 0


def test_a_drawing_out_of_date_is_caught() -> None:
    stale = f"# x\n{draw_tables.BEGIN}\nold\n{draw_tables.END}\n"
    assert draw_tables.drawn(stale) != stale
    assert "[*] --> begin" in draw_tables.drawn(stale)
    with pytest.raises(ValueError, match=r"no .* block"):
        draw_tables.drawn("# no markers\n")
