"""Stop sequences over streamed text (pure helpers every backend streams through)."""

from __future__ import annotations

from swapos.backends.stops import StopStream, find_stop, held_back


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


def test_a_stream_never_emits_a_stop_or_what_follows_it() -> None:
    stream = StopStream(["\n```"])
    emitted = [stream.add(p) for p in ("def f():", "\n", "  return 1\n`", "``\nThat is all")]
    assert emitted == ["def f():", "", "\n  return 1", ""]
    assert stream.stopped and stream.text == "def f():\n  return 1"
    assert stream.add("more") == "" and stream.finish("tail") == ""


def test_a_stream_without_a_stop_emits_everything_by_its_end() -> None:
    stream = StopStream(["\n```", ""])
    pieces = [stream.add(p) for p in ("a\n", "``")] + [stream.finish("b")]
    assert "".join(pieces) == stream.text == "a\n``b" and not stream.stopped
