"""The context capsule: JSON round trip, versioning, compression to a token budget."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swapos.capsule.compress import CapsuleView, compress, key_line, shorten
from swapos.capsule.render import render_capsule, render_view
from swapos.capsule.schema import (
    CAPSULE_VERSION,
    Artifact,
    Capsule,
    CapsuleBudgetError,
    CapsuleError,
    CapsuleMeta,
    CapsuleVersionError,
    Decision,
    Feedback,
    PhaseEntry,
    decode_capsule,
    encode_capsule,
    new_capsule,
    with_artifact,
    with_decision,
    with_feedback,
    with_history,
    with_plan,
    with_verdict,
)


def count_words(text: str) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def long_history(attempts: int = 30) -> Capsule:
    capsule = new_capsule(
        task_id="bugfix/mean",
        category="bugfix",
        goal="Make `mean` return 0.0 for an empty list instead of crashing.",
        constraints=["Keep the signature."],
    )
    capsule = with_plan(capsule, ["Check for an empty list.", "Return the mean otherwise."])
    for n in range(1, attempts + 1):
        code = f"def mean(xs):\n    # attempt {n}\n" + "".join(
            f"    step_{i} = {i} * {n}\n" for i in range(20)
        )
        capsule = with_artifact(capsule, Artifact(attempt=n, phase="code", code=code))
        capsule = with_verdict(capsule, attempt=n, passed=False)
        log = "\n".join(f"line {i} of the pytest log for attempt {n}" for i in range(40))
        capsule = with_feedback(
            capsule,
            Feedback(
                attempt=n,
                source="grader",
                text=log + "\nE   ZeroDivisionError",
                tests_passed=1,
                tests_total=3,
            ),
        )
        capsule = with_feedback(
            capsule, Feedback(attempt=n, source="critic", text=f"Attempt {n}: guard len(xs) == 0.")
        )
        capsule = with_history(
            capsule, PhaseEntry(phase="code", model="m", attempt=n, outcome="ok")
        )
    return capsule


# --- round trip -----------------------------------------------------------------------------

texts = st.text(max_size=40)
optional_int = st.none() | st.integers(min_value=0, max_value=10**6)
artifacts = st.builds(
    Artifact,
    attempt=st.integers(1, 50),
    phase=texts,
    code=st.text(max_size=200),
    passed=st.none() | st.booleans(),
)
feedbacks = st.builds(
    Feedback,
    attempt=st.integers(1, 50),
    source=st.sampled_from(["grader", "critic"]),
    text=st.text(max_size=200),
    tests_passed=optional_int,
    tests_total=optional_int,
)
capsules = st.builds(
    Capsule,
    meta=st.builds(CapsuleMeta, task_id=texts, category=texts, difficulty=st.integers(-5, 5)),
    goal=st.text(max_size=200),
    constraints=st.lists(texts, max_size=4).map(tuple),
    plan_steps=st.lists(texts, max_size=6).map(tuple),
    artifacts=st.lists(artifacts, max_size=4).map(tuple),
    feedback=st.lists(feedbacks, max_size=4).map(tuple),
    decisions=st.lists(st.builds(Decision, phase=texts, text=texts), max_size=3).map(tuple),
    history=st.lists(
        st.builds(PhaseEntry, phase=texts, model=texts, attempt=st.integers(0, 9), outcome=texts),
        max_size=4,
    ).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(capsules)
def test_round_trip_is_byte_identical_for_any_capsule(capsule: Capsule) -> None:
    encoded = encode_capsule(capsule)
    decoded = decode_capsule(encoded)
    assert decoded == capsule
    assert encode_capsule(decoded) == encoded


def test_round_trip_of_a_long_history_is_byte_identical() -> None:
    capsule = with_decision(long_history(), Decision(phase="router", text="skipped reason"))
    encoded = encode_capsule(capsule)
    assert encode_capsule(decode_capsule(encoded)) == encoded
    assert decode_capsule(encoded.decode()) == capsule


def test_encoding_writes_the_version_first() -> None:
    encoded = encode_capsule(new_capsule(task_id="t", category="feature", goal="g"))
    assert encoded.startswith(b'{"version":%d,' % CAPSULE_VERSION)


def test_decoding_a_newer_version_says_to_upgrade() -> None:
    data = encode_capsule(new_capsule(task_id="t", category="feature", goal="g"))
    newer = data.replace(
        b'"version":%d' % CAPSULE_VERSION, b'"version":%d' % (CAPSULE_VERSION + 1), 1
    )
    with pytest.raises(
        CapsuleVersionError, match=rf"version {CAPSULE_VERSION + 1} is newer.*upgrade"
    ):
        decode_capsule(newer)


def test_decoding_a_newer_version_with_unknown_fields_still_reports_the_version() -> None:
    with pytest.raises(CapsuleVersionError):
        decode_capsule(b'{"version": 7, "shiny_new_field": [1, 2]}')


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"not json", "not a capsule"),
        (b"[1, 2]", "not a capsule"),
        (b'{"goal": "g"}', "version"),
        (b'{"version": 0, "goal": "g"}', "invalid"),
        (b'{"version": 1, "goal": "g"}', "meta"),
        (b'{"version": 1, "goal": 3, "meta": {"task_id": "t", "category": "c"}}', "goal"),
    ],
)
def test_decoding_garbage_raises_a_capsule_error_naming_the_problem(
    data: bytes, match: str
) -> None:
    with pytest.raises(CapsuleError, match=match):
        decode_capsule(data)


def test_unknown_fields_in_the_current_version_are_rejected() -> None:
    data = encode_capsule(new_capsule(task_id="t", category="c", goal="g"))
    with pytest.raises(CapsuleError, match="unknown"):
        decode_capsule(data[:-1] + b',"surprise":1}')


def test_helpers_return_new_capsules_and_leave_the_original_alone() -> None:
    base = new_capsule(task_id="t", category="bugfix", goal="g")
    grown = with_artifact(base, Artifact(attempt=1, phase="code", code="x = 1\n"))
    assert base.artifacts == ()
    assert grown.newest_artifact is not None
    assert grown.newest_artifact.code == "x = 1\n"
    graded = with_verdict(grown, attempt=1, passed=True)
    assert grown.artifacts[0].passed is None
    assert graded.artifacts[0].passed is True
    assert graded.attempts == 1
    with pytest.raises(CapsuleError, match="no artifact for attempt 2"):
        with_verdict(graded, attempt=2, passed=False)


def test_capsule_package_imports_nothing_from_swapos_above_it() -> None:
    package = Path(__file__).parents[1] / "swapos" / "capsule"
    for module in package.glob("*.py"):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert (
                    not node.module.startswith("swapos")
                    or node.module.startswith("swapos.capsule")
                    or node.module == "swapos.errors"  # the one exception hierarchy, below it
                ), f"{module.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert all(not a.name.startswith("swapos") for a in node.names), module.name


# --- compression ----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [160, 220, 400, 800, 3000])
def test_long_history_stays_under_budget_with_goal_and_newest_artifact_whole(budget: int) -> None:
    capsule = long_history(30)
    rendered = render_capsule(capsule, count_tokens=count_words, budget_tokens=budget)
    assert count_words(rendered.text) <= budget
    assert capsule.goal in rendered.text
    newest = capsule.newest_artifact
    assert newest is not None
    assert newest.code.strip("\n") in rendered.text


def test_older_artifacts_are_never_shown_in_full() -> None:
    rendered = render_capsule(long_history(30), count_tokens=count_words, budget_tokens=10_000)
    assert "# attempt 30" in rendered.text
    assert "# attempt 29\n" not in rendered.text
    assert "attempt 29: failed (1/3 tests passed); critic: Attempt 29" in rendered.text
    assert rendered.dropped == ()


def test_tight_budget_drops_oldest_attempts_first_and_keeps_the_plan() -> None:
    capsule = long_history(30)
    rendered = render_capsule(capsule, count_tokens=count_words, budget_tokens=250)
    assert "attempt 29: failed" in rendered.text
    assert "attempt 1: failed" not in rendered.text
    assert re.search(r"\(\d+ earlier attempts not shown\)", rendered.text)
    assert "1. Check for an empty list." in rendered.stable
    assert "attempt 1" in rendered.dropped


def test_each_budget_degrades_in_the_documented_order() -> None:
    capsule = long_history(4)
    full = render_capsule(capsule, count_tokens=count_words, budget_tokens=10_000).text
    order = [
        "attempt 1 details",
        "attempt 2 details",
        "attempt 3 details",
        "feedback shortened",
        "attempt 1",
        "attempt 2",
        "attempt 3",
        "plan",
        "feedback to one line",
        "constraints",
        "feedback",
    ]
    seen_plan_dropped = False
    for budget in range(count_words(full), 0, -5):
        try:
            rendered = render_capsule(capsule, count_tokens=count_words, budget_tokens=budget)
        except CapsuleBudgetError:
            assert seen_plan_dropped
            break
        assert count_words(rendered.text) <= budget
        steps = list(rendered.dropped)
        assert steps == order[: len(steps)]
        seen_plan_dropped = seen_plan_dropped or "plan" in steps
        assert ("## Plan" in rendered.text) == ("plan" not in steps)
        assert ("## Review" in rendered.text) == ("feedback" not in steps)
    else:
        pytest.fail("the budget error was never reached")


def test_compression_is_deterministic() -> None:
    capsule = long_history(12)
    first = render_capsule(capsule, count_tokens=count_words, budget_tokens=300)
    second = render_capsule(capsule, count_tokens=count_words, budget_tokens=300)
    assert first == second


def test_budget_error_when_goal_and_newest_artifact_alone_do_not_fit() -> None:
    capsule = long_history(2)
    with pytest.raises(CapsuleBudgetError, match=r"budget is 40; raise the model's n_ctx"):
        render_capsule(capsule, count_tokens=count_words, budget_tokens=40)


def test_render_without_attempts_has_an_empty_variable_part() -> None:
    capsule = with_plan(new_capsule(task_id="t", category="feature", goal="Add `f`."), ["a"])
    rendered = render_capsule(capsule, count_tokens=count_words, budget_tokens=100)
    assert rendered.stable == "## Task\nAdd `f`.\n\n## Plan\n1. a\n"
    assert rendered.variable == ""


def test_compress_counts_what_the_layout_renders() -> None:
    capsule = long_history(5)
    seen: list[str] = []

    def layout(view: CapsuleView) -> str:
        text = "PREFIX " * 50 + render_view(view).text
        seen.append(text)
        return text

    view = compress(capsule, count_tokens=count_words, budget_tokens=300, layout=layout)
    assert count_words(layout(view)) <= 300
    assert len(seen) > 2


def test_shorten_keeps_error_lines_and_the_summary() -> None:
    log = "\n".join(
        [*(f"noise {i}" for i in range(30)), "E   assert 3 == 4", *(f"more {i}" for i in range(30))]
    )
    short = shorten(log + "\n1 failed, 2 passed in 0.1s")
    assert "E   assert 3 == 4" in short
    assert short.endswith("1 failed, 2 passed in 0.1s")
    assert "lines cut" in short
    assert key_line(log) == "assert 3 == 4"


def test_decoded_capsule_is_hashable_and_frozen() -> None:
    capsule = decode_capsule(encode_capsule(long_history(2)))
    assert hash(capsule) == hash(long_history(2))
    with pytest.raises(AttributeError):
        capsule.goal = "other"  # type: ignore[misc]
    assert msgspec.structs.replace(capsule, goal="other").goal == "other"
