"""A model's lifecycle (swapos/data/lifecycle.py), walked through the ledger that records it:
every state reachable, every declared transition exercised by a row of :data:`MOVES`, every
undeclared one a :class:`LifecycleError`."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from swapos.data.lifecycle import (
    TRANSITIONS,
    Lifecycle,
    LifecycleError,
    check_transition,
    diagram,
    is_valid_transition,
)
from swapos.data.residency import RoomPlan
from swapos.errors import SwapOSError
from swapos.policies.ledger import Ledger

ABSENT, WAITING, LOADING, READY, EVICTING = Lifecycle
EMPTY = RoomPlan(victims=[], cancel=[])

Move = Callable[[Ledger], None]


def _want(ledger: Ledger) -> None:
    ledger.want("m", speculative=True, now=0.0)


def _reserve(ledger: Ledger) -> None:
    ledger.reserve("m", EMPTY, 10)


def _loaded(ledger: Ledger) -> None:
    ledger.loaded("m", 10)


def _evicting(ledger: Ledger) -> None:
    ledger.evicting("m")


def _forget(ledger: Ledger) -> None:
    ledger.forget("m")


def _chosen_as_victim(ledger: Ledger) -> None:
    ledger.want("other", speculative=False, now=0.0)
    ledger.reserve("other", RoomPlan(victims=["m"], cancel=[]), 10)


def _cancelled_by_an_urgent_plan(ledger: Ledger) -> None:
    ledger.want("other", speculative=False, now=0.0)
    ledger.reserve("other", RoomPlan(victims=[], cancel=["m"]), 10)


PATH: dict[Lifecycle, list[Move]] = {
    ABSENT: [],
    WAITING: [_want],
    LOADING: [_want, _reserve],
    READY: [_want, _reserve, _loaded],
    EVICTING: [_want, _reserve, _loaded, _evicting],
}
"""How model ``m`` gets to each state, by declared moves only."""

MOVES: dict[tuple[Lifecycle, Lifecycle], list[Move]] = {
    (ABSENT, WAITING): [_want],
    (WAITING, LOADING): [_reserve],
    (WAITING, ABSENT): [_forget],
    (LOADING, READY): [_loaded],
    (LOADING, EVICTING): [_cancelled_by_an_urgent_plan],
    (LOADING, ABSENT): [_forget],
    (READY, EVICTING): [_evicting, _chosen_as_victim],
    (EVICTING, ABSENT): [_forget],
}
"""Each declared transition, and the ledger calls that make it (a row each)."""

TARGET: dict[Lifecycle, Move] = {
    WAITING: _want,
    LOADING: _reserve,
    READY: _loaded,
    EVICTING: _evicting,
    ABSENT: _forget,
}
"""The ledger call that moves ``m`` to each state."""


def _at(state: Lifecycle) -> Ledger:
    ledger = Ledger(1000)
    for move in PATH[state]:
        move(ledger)
    assert ledger.status("m") is state
    return ledger


def test_every_declared_transition_has_a_row_and_every_row_is_declared() -> None:
    assert set(MOVES) == set(TRANSITIONS)


def test_every_state_is_reachable_from_absent_and_leads_back_to_it() -> None:
    def reachable(start: Lifecycle, edges: set[tuple[Lifecycle, Lifecycle]]) -> set[Lifecycle]:
        seen, todo = {start}, [start]
        while todo:
            here = todo.pop()
            for old, new in edges:
                if old is here and new not in seen:
                    seen.add(new)
                    todo.append(new)
        return seen

    edges = set(TRANSITIONS)
    assert reachable(ABSENT, edges) == set(Lifecycle)
    back = {(new, old) for old, new in edges}
    assert reachable(ABSENT, back) == set(Lifecycle)  # no state is a dead end


@pytest.mark.parametrize(
    ("old", "new", "move"),
    [(old, new, move) for (old, new), moves in MOVES.items() for move in moves],
    ids=lambda v: getattr(v, "value", getattr(v, "__name__", "")),
)
def test_each_row_makes_its_transition(old: Lifecycle, new: Lifecycle, move: Move) -> None:
    ledger = _at(old)
    move(ledger)
    assert ledger.status("m") is new


PAIRS = itertools.product(Lifecycle, repeat=2)
UNDECLARED = [(old, new) for old, new in PAIRS if (old, new) not in TRANSITIONS]


def test_the_undeclared_moves_are_all_the_others() -> None:
    assert len(UNDECLARED) == len(Lifecycle) ** 2 - len(TRANSITIONS)
    assert not any(is_valid_transition(old, new) for old, new in UNDECLARED)


@pytest.mark.parametrize(("old", "new"), UNDECLARED, ids=lambda s: s.value)
def test_an_undeclared_transition_raises_and_changes_nothing(
    old: Lifecycle, new: Lifecycle
) -> None:
    with pytest.raises(LifecycleError, match=f"{old.value} -> {new.value}"):
        check_transition("m", old, new)
    ledger = _at(old)
    entry = ledger.entry("m")
    with pytest.raises(LifecycleError, match="a bug in the Loader"):
        TARGET[new](ledger)
    assert ledger.status("m") is old and ledger.entry("m") == entry


def test_a_lifecycle_error_is_a_bug_not_a_domain_failure() -> None:
    assert not issubclass(LifecycleError, SwapOSError)  # the Loader's handlers never catch it


def test_served_names_keep_the_wire_spelling() -> None:
    assert {s: s.served for s in Lifecycle} == {
        ABSENT: "absent",
        WAITING: "loading",
        LOADING: "loading",
        READY: "ready",
        EVICTING: "evicting",
    }


def test_the_architecture_page_draws_the_table_as_it_is() -> None:
    page = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    start = page.index("<!-- lifecycle diagram: generated by swapos.data.lifecycle.diagram() -->")
    end = page.index("<!-- end of the lifecycle diagram -->")
    drawn = page[start:end].split("\n", 1)[1]
    assert drawn == diagram()
