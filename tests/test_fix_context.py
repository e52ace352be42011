"""What a fixer reads beyond its conversation: the best candidate it starts from (the retry
policy's best-candidate rule)."""

from __future__ import annotations

from swapos.capsule.schema import (
    Artifact,
    Capsule,
    Feedback,
    with_artifact,
    with_feedback,
    with_verdict,
)
from swapos.data.task import Task, TaskMeta
from swapos.models.templates import CHATML, ChatFormat, decode_messages
from swapos.pipeline.chat_prompts import build_chat_prompt
from swapos.pipeline.prompts import build_prompt, capsule_for_task

QUERY_CODE = '''def parse_query(query: str) -> dict[str, str]:
    """Parse a query string such as "a=1&b=2" into {"a": "1", "b": "2"}."""
    result = {}
    for pair in query.split("&"):
        key, value = pair.split("=")
        if key:
            result[key] = value
    return result
'''

FMT = ChatFormat(template=CHATML, messages=True)
TASK = Task(
    meta=TaskMeta(task_id="bugfix/query", category="bugfix", difficulty=2),
    root="",
    problem="`parse_query` must keep `=` in values and skip empty pieces.",
    starter=QUERY_CODE,
    tests={"test_parse_query.py": "SECRET TEST SOURCE"},
)


def count_words(text: str) -> int:
    return len(text.split())


def graded(
    capsule: Capsule, attempt: int, code: str, text: str, counts: tuple[int, int]
) -> Capsule:
    capsule = with_artifact(capsule, Artifact(attempt=attempt, phase="code", code=code))
    capsule = with_verdict(capsule, attempt=attempt, passed=False)
    feedback = Feedback(
        attempt=attempt, source="grader", text=text, tests_passed=counts[0], tests_total=counts[1]
    )
    return with_feedback(capsule, feedback)


BETTER = QUERY_CODE.replace('pair.split("=")', 'pair.split("=", 1)')
WORSE = QUERY_CODE.replace("if key:", "if not key:")


def test_a_fixer_starting_from_the_best_candidate_reads_its_code_last() -> None:
    capsule = graded(capsule_for_task(TASK), 1, BETTER, "1/5 tests failed: test_empty", (4, 5))
    capsule = graded(capsule, 2, WORSE, "3/5 tests failed: test_a", (2, 5))
    based = build_chat_prompt("code", TASK, capsule, count_words, 5000, FMT, base=1)
    turn = decode_messages(based.text)[-1].content
    note = (
        "Attempt 2 passes fewer tests than attempt 1 (2/5 tests passed; attempt 1: 4/5 tests "
        "passed). Start again from attempt 1's code and fix it:"
    )
    assert note in turn and turn.index(note) < turn.index('pair.split("=", 1)')
    assert "3/5 tests failed: test_a" in turn  # after the newest outcome
    plain = build_chat_prompt("code", TASK, capsule, count_words, 5000, FMT)
    assert decode_messages(based.text)[:-1] == decode_messages(plain.text)[:-1]  # append-only
    assert "Start again" not in plain.text
    base_model = build_prompt("code", TASK, capsule, count_words, 5000, base=1)
    assert "## Start again from attempt 1\n" + note in base_model.text
    assert base_model.text.endswith("## Fixed solution.py\n```python\n")
