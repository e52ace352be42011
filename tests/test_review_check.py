"""Checked reviews (retry rule 12): a review's claimed cause against the test output.

The outputs are the grader's, as a capsule records them (the first two from the builtin
suite's run of 2026-12-01, with the reviews the 1.5B wrote of them); the others follow the
failures the issue-25 run reported (an escaped-quote CSV parser reviewed as "does not handle
newlines", a TSV refactor whose review blamed a function its tests never reach).
"""

from __future__ import annotations

import pytest

from swapos.policies.review_check import ReviewCheck, cause, check_review

QUERY_OUTPUT = '''3/5 tests failed: test_value_containing_equals, test_empty_query, \
test_empty_pieces_are_skipped. First: ValueError: too many values to unpack (expected 2)
.FFF.                                                                    [100%]
=================================== FAILURES ===================================
_________________________ test_value_containing_equals _________________________

    def test_value_containing_equals() -> None:
>       assert parse_query("sig=abc==") == {"sig": "abc=="}
               ^^^^^^^^^^^^^^^^^^^^^^^^

test_parse_query.py:9:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

query = 'sig=abc=='

    def parse_query(query: str) -> dict[str, str]:
        """Parse a query string such as "a=1&b=2" into {"a": "1", "b": "2"}."""
        result = {}
        for pair in query.split("&"):
>           key, value = pair.split("=")
            ^^^^^^^^^^
E           ValueError: too many values to unpack (expected 2)

solution.py:5: ValueError
_______________________________ test_empty_query _______________________________

    def test_empty_query() -> None:
>       assert parse_query("") == {}
               ^^^^^^^^^^^^^^^

test_parse_query.py:14:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

query = ''

    def parse_query(query: str) -> dict[str, str]:
        result = {}
        for pair in query.split("&"):
>           key, value = pair.split("=")
E           ValueError: not enough values to unpack (expected 2, got 1)

solution.py:5: ValueError
=========================== short test summary info ============================
FAILED test_parse_query.py::test_value_containing_equals - ValueError: too many...
FAILED test_parse_query.py::test_empty_query - ValueError: not enough values...
'''
QUERY_CODE = '''def parse_query(query: str) -> dict[str, str]:
    """Parse a query string such as "a=1&b=2" into {"a": "1", "b": "2"}."""
    result = {}
    for pair in query.split("&"):
        key, value = pair.split("=")
        if key:
            result[key] = value
    return result
'''
BACKOFF_OUTPUT = """3/4 tests failed: test_first_retry_waits_base, test_delay_doubles, \
test_custom_base_and_cap. First: assert 1.0 == 0.5
FF.F                                                                     [100%]
=================================== FAILURES ===================================
_________________________ test_first_retry_waits_base __________________________

    def test_first_retry_waits_base() -> None:
>       assert backoff_delay(1) == 0.5
E       assert 1.0 == 0.5
E        +  where 1.0 = backoff_delay(1)

test_backoff_delay.py:5: AssertionError
______________________________ test_delay_doubles ______________________________

    def test_delay_doubles() -> None:
>       assert [backoff_delay(a) for a in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
E       assert [1.0, 2.0, 4.0, 8.0] == [0.5, 1.0, 2.0, 4.0]

test_backoff_delay.py:9: AssertionError
=========================== short test summary info ============================
"""
BACKOFF_CODE = (
    "def backoff_delay(attempt, base=0.5, cap=30.0):\n    return min(cap, base * 2 ** attempt)\n"
)
CSV_OUTPUT = """1/6 tests failed: test_escaped_quotes. \
First: assert [['a', 'b', 'c']] == [['a', 'b"c']]
.....F                                                                   [100%]
=================================== FAILURES ===================================
_____________________________ test_escaped_quotes ______________________________

    def test_escaped_quotes() -> None:
>       assert parse_csv('a,"b""c"') == [["a", 'b"c']]
E       assert [['a', 'b', 'c']] == [['a', 'b"c']]
E        +  where [['a', 'b', 'c']] = parse_csv('a,"b""c"')

test_parse_csv.py:21: AssertionError
=========================== short test summary info ============================
"""
CSV_CODE = (
    "def _split(line):\n    return [f.strip('\"') for f in line.split(',')]\n\n\n"
    "def parse_csv(text):\n    return [_split(line) for line in text.splitlines()]\n"
)
TSV_OUTPUT = """1/8 tests failed: test_header_is_skipped. First: assert [{'a': 'a'}] == []
.......F                                                                 [100%]
=================================== FAILURES ===================================
____________________________ test_header_is_skipped ____________________________

    def test_header_is_skipped() -> None:
>       assert load_rows("a\\tb\\n") == []
E       AssertionError: assert [{'a': 'a', 'b': 'b'}] == []
E        +  where [{'a': 'a', 'b': 'b'}] = load_rows('a\\tb\\n')

test_tsv.py:30: AssertionError
"""
TSV_CODE = (
    "def split_line(line):\n    return line.rstrip('\\n').split('\\t')\n\n\n"
    "def format_row(row):\n    return '\\t'.join(row)\n\n\n"
    "def load_rows(text):\n    lines = text.splitlines()\n"
    "    header = split_line(lines[0])\n"
    "    return [dict(zip(header, split_line(x))) for x in lines]\n"
)

CASES: list[tuple[str, str, str, str, ReviewCheck]] = [
    (
        "a review naming the input and the error the output shows",
        "The attempt 2 fails because it does not handle the case where the query string "
        "contains multiple `=` characters, which would result in a `ValueError` when trying "
        "to split the pair.",
        QUERY_OUTPUT,
        QUERY_CODE,
        ReviewCheck(verified=True),
    ),
    (
        "a review naming the failing function, with a fix that names new things",
        "The attempt fails because the exponent in the `backoff_delay` function is off by one. "
        "The correct exponent should be `attempt - 1`. The change is to adjust the exponent "
        "in the `backoff_delay` function to `attempt - 1`.",
        BACKOFF_OUTPUT,
        BACKOFF_CODE,
        ReviewCheck(verified=True),
    ),
    (
        "a review naming a case no failing test has (escaped quotes reviewed as newlines)",
        "The code fails because it does not handle newlines inside quoted fields. To fix it, "
        "use the csv module.",
        CSV_OUTPUT,
        CSV_CODE,
        ReviewCheck(
            verified=False, why="it names the case newlines, which no failing test's output shows"
        ),
    ),
    (
        "a review blaming a function the failing test never reaches",
        "The test fails because `format_row` joins the fields in the wrong order.",
        TSV_OUTPUT,
        TSV_CODE,
        ReviewCheck(
            verified=False, why="it names `format_row`, which no failing test's output shows"
        ),
    ),
    (
        "a review naming a test that did not fail",
        "test_empty_pieces_are_skipped fails because empty pieces are kept.",
        BACKOFF_OUTPUT,
        BACKOFF_CODE,
        ReviewCheck(
            verified=False,
            why="it names the test test_empty_pieces_are_skipped, "
            "which no failing test's output shows",
        ),
    ),
    (
        "a review naming an input no failing test gives",
        'It fails for the input "a;b=2" because semicolons are not separators.',
        QUERY_OUTPUT,
        QUERY_CODE,
        ReviewCheck(
            verified=False, why='it names the input "a;b=2", which no failing test\'s output shows'
        ),
    ),
    (
        "a review naming the empty input the output shows",
        "The code fails on an empty query string: splitting it gives one empty pair.",
        QUERY_OUTPUT,
        QUERY_CODE,
        ReviewCheck(verified=True),
    ),
    (
        "a review naming negative numbers where every input is positive",
        "It fails because negative attempts are not clamped to zero.",
        BACKOFF_OUTPUT,
        BACKOFF_CODE,
        ReviewCheck(
            verified=False,
            why="it names the case negative numbers and the case zero, "
            "which no failing test's output shows",
        ),
    ),
    (
        "a vague review names nothing to check",
        "The code is incorrect and fails the tests.",
        CSV_OUTPUT,
        CSV_CODE,
        ReviewCheck(verified=True),
    ),
    (
        "a helper the traceback passes through is shown",
        "It fails because `parse_query` unpacks every piece into exactly two values.",
        QUERY_OUTPUT,
        QUERY_CODE,
        ReviewCheck(verified=True),
    ),
    (
        "the quotes a review names are in the output",
        "The parser fails because doubled quotes inside a quoted field are split.",
        CSV_OUTPUT,
        CSV_CODE,
        ReviewCheck(verified=True),
    ),
]


@pytest.mark.parametrize(
    ("case", "review", "output", "code", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_a_review_is_checked_against_the_test_output(
    case: str, review: str, output: str, code: str, expected: ReviewCheck
) -> None:
    assert check_review(review, output, code=code) == expected, case


def test_the_cause_leaves_out_what_to_change() -> None:
    review = (
        "The attempt fails because `f` returns None. To fix it, call `g` instead. "
        "Here's the corrected code: ..."
    )
    assert cause(review) == "The attempt fails because `f` returns None."
