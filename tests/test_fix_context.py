"""What a fixer reads beyond its conversation: the best candidate it starts from (retry rule
10) and the focus prompt (rule 11), from a grade's real pytest output."""

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
from swapos.pipeline.failures import Failure, exercised_lines, failures, first_failure
from swapos.pipeline.identity import candidate_identity, candidate_shape
from swapos.pipeline.prompts import build_prompt, capsule_for_task
from tests.test_review_check import BACKOFF_CODE, BACKOFF_OUTPUT, QUERY_CODE, QUERY_OUTPUT

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


def test_each_failing_test_is_read_with_its_line_error_and_frames() -> None:
    found = failures(QUERY_OUTPUT)
    assert [f.test for f in found] == ["test_value_containing_equals", "test_empty_query"]
    assert found[0] == Failure(
        test="test_value_containing_equals",
        line='assert parse_query("sig=abc==") == {"sig": "abc=="}',
        error="ValueError: too many values to unpack (expected 2)",
        frames=(5,),
    )
    assert found[1].line == 'assert parse_query("") == {}'


def test_output_without_sections_is_its_first_line() -> None:
    failure = first_failure(
        "all 3 tests errored: SyntaxError: invalid syntax (solution.py, line 2)"
    )
    assert failure is not None and not failure.test
    assert failure.headline.startswith("all 3 tests errored: SyntaxError")
    assert first_failure("") is None


def test_the_lines_a_traceback_passes_through_are_shown_and_marked() -> None:
    lines = exercised_lines(QUERY_CODE, failures(QUERY_OUTPUT)[0]).splitlines()
    assert lines[0] == "  1 | def parse_query(query: str) -> dict[str, str]:"
    assert lines[4] == '> 5 |         key, value = pair.split("=")'
    assert len(lines) == QUERY_CODE.count("\n")


def test_an_assertion_shows_the_function_its_line_calls() -> None:
    failure = failures(BACKOFF_OUTPUT)[0]
    assert failure.frames == () and failure.error == "assert 1.0 == 0.5"
    assert exercised_lines(BACKOFF_CODE, failure).splitlines() == [
        "  1 | def backoff_delay(attempt, base=0.5, cap=30.0):",
        "  2 |     return min(cap, base * 2 ** attempt)",
    ]


def test_a_shape_sets_names_aside_but_not_what_the_code_does() -> None:
    one = "def add(a, b):\n    # the sum\n    total = a - b\n    return total\n"
    renamed = "def add(x, y):\n    result = x - y\n    return result\n"
    assert candidate_identity(one) != candidate_identity(renamed)
    assert candidate_shape(one) == candidate_shape(renamed)
    assert candidate_shape(one) != candidate_shape(renamed.replace("x - y", "x + y"))
    assert candidate_shape(one) != candidate_shape(one.replace("def add", "def plus"))
    assert candidate_shape("def f(:\n") == candidate_shape("def  f(:")  # unparsable: words


def test_a_focus_prompt_leads_with_the_failing_example() -> None:
    capsule = graded(capsule_for_task(TASK), 1, QUERY_CODE, QUERY_OUTPUT, (3, 5))
    prompt = build_chat_prompt("code", TASK, capsule, count_words, 5000, FMT, focus=True)
    messages = decode_messages(prompt.text)
    assert [m.role for m in messages] == ["system", "user"]
    turn = messages[1].content
    assert turn.splitlines()[0] == (
        'This fails: assert parse_query("sig=abc==") == {"sig": "abc=="}  ->  '
        "ValueError: too many values to unpack (expected 2)"
    )
    assert '> 5 |         key, value = pair.split("=")' in turn
    assert "`parse_query` must keep `=` in values" in turn  # the brief
    assert "Make the smallest change to solution.py that makes this one test pass" in turn
    assert "SECRET" not in prompt.text
    plain = build_chat_prompt("code", TASK, capsule, count_words, 5000, FMT)
    assert decode_messages(plain.text)[1].content.splitlines()[0] != turn.splitlines()[0]


def test_a_base_models_focus_prompt_leads_with_the_failing_example_too() -> None:
    capsule = graded(capsule_for_task(TASK), 1, QUERY_CODE, QUERY_OUTPUT, (3, 5))
    prompt = build_prompt("code", TASK, capsule, count_words, 5000, focus=True)
    assert prompt.text.startswith('## Failing test\nThis fails: assert parse_query("sig=abc==")')
    assert "## Lines it runs" in prompt.text and prompt.text.endswith("```python\n")


def test_a_focus_prompt_after_an_unchanged_starter_uses_the_failed_check() -> None:
    capsule = with_artifact(
        capsule_for_task(TASK), Artifact(attempt=1, phase="code", code=QUERY_CODE)
    )
    check = Feedback(attempt=1, source="selfcheck", text='parse_query("") raised ValueError')
    capsule = with_feedback(with_verdict(capsule, attempt=1, passed=False), check)
    prompt = build_chat_prompt("code", TASK, capsule, count_words, 5000, FMT, focus=True)
    turn = decode_messages(prompt.text)[1].content
    assert turn.splitlines()[0] == 'parse_query("") raised ValueError'


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


# The grader's output on the issues suite's csv-escaped-quotes starter (a parametrized test;
# the output's tail begins inside the first failing section, as the grader keeps it).
PARAMETRIZED = '''6/10 tests failed: \
test_doubled_quotes_are_one_quote[id,"say ""hi""",ok-expected0], \
test_round_trip_through_join_row. First: assert ['id', 'say hi', 'ok'] == ['id', 'say "hi"', 'ok']
:
>       assert split_row(line) == expected
E       assert ['id', 'say hi', 'ok'] == ['id', 'say "hi"', 'ok']

../tests/test_split_row.py:29: AssertionError
___________ test_doubled_quotes_are_one_quote["a ""b"" c"-expected1] ___________

line = '"a ""b"" c"', expected = ['a "b" c']

    @pytest.mark.parametrize(
        "line, expected",
        [
            ('"a ""b"" c"', ['a "b" c']),
        ],
    )
    def test_doubled_quotes_are_one_quote(line, expected):
>       assert split_row(line) == expected
E       assert ['a b c'] == ['a "b" c']
E
E         At index 0 diff: 'a b c' != 'a "b" c'

../tests/test_split_row.py:29: AssertionError
___________________________ test_the_deploy_config ____________________________

    def test_the_deploy_config():
>       assert parse_ini(CONFIG) == {
            "DEFAULT": {"timeout": "30"},
        }
E       AssertionError: assert {'empty': {}} == {'DEFAULT': {'timeout': '30'}}

../tests/test_ini.py:20: AssertionError
'''


def test_a_parametrized_failure_names_its_example() -> None:
    first, second = failures(PARAMETRIZED)
    assert first.test == 'test_doubled_quotes_are_one_quote["a ""b"" c"-expected1]'
    assert first.headline == (
        'This fails: assert split_row(line) == expected, with line = \'"a ""b"" c"\', '
        "expected = ['a \"b\" c']  ->  assert ['a b c'] == ['a \"b\" c']"
    )
    assert second.line == 'assert parse_ini(CONFIG) == { "DEFAULT": {"timeout": "30"}, }'
    assert not second.args
