"""Stop sequences over streamed text (the llama backend's pure helpers; no model needed)."""

from __future__ import annotations

from swapos.backends.llama.stops import find_stop, held_back


def test_a_possible_stop_prefix_is_held_back() -> None:
    assert held_back("abc\n`", ["\n```"]) == 2
    assert held_back("abc\n``", ["\n```", "``x"]) == 3
    assert held_back("abc", ["\n```"]) == 0
    assert held_back("abc", []) == 0


def test_the_earliest_stop_not_before_what_was_emitted_is_found() -> None:
    assert find_stop("x\n```y", ["\n```"], 0) == 1
    assert find_stop("abc", ["zz"], 0) is None
    assert find_stop("a END b STOP", ["STOP", "END"], 0) == 2
    # A stop straddling the emitted boundary is still found; one wholly before it is not.
    assert find_stop("ab\n``", ["\n``"], 3) == 2
    assert find_stop("\n`` more", ["\n``"], 4) is None
