"""Whether a review's claimed cause is borne out by the test output (retry rule 12). Pure.

A small model's review often names a cause the tests never showed: a CSV parser whose
escaped quotes fail is reviewed as "does not handle newlines", a refactor's failing test is
blamed on a function its traceback never passes through. Shown to the fixer as fact, such a
review sends it after the wrong change. :func:`check_review` reads the review's *cause* (its
sentences that say why it fails, not those that say what to change) and the things it names:

* a test (``test_empty_query``): it must be one whose output is shown;
* a function or class of the candidate (in backticks, or called: ``split_fields(...)``): the
  output must show it (a failing test calls it, or its traceback passes through it);
* an input (a quoted string, or a literal in backticks): the output must contain it;
* a case (newlines, empty input, negative numbers, zero, None, whitespace, tabs, quotes,
  non-ASCII text, floats): the output must show an input of that kind.

A review that names one such thing the output does not show is *unverified* (the reason
says which); one that names none of them, or only things the output shows, is verified:
the check never rejects a review for being vague, only for naming what the tests did not
show. "The output" is every failed grade's test output the critic read.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Final

import msgspec

_SENTENCE: Final = re.compile(r"(?<=[.!?])\s+|\n+")
_CAUSE: Final = re.compile(
    r"\b(because|fails?|failing|does not|doesn't|do not|don't|not handl\w*|error|wrong|"
    r"incorrect\w*|missing|issue|problem|bug|breaks?|never|ignores?|mis\w+)\b",
    re.IGNORECASE,
)
_FIX: Final = re.compile(
    r"^\s*(to fix|the fix|fix|change|replace|use|add|remove|here|we (need|can|should)|you "
    r"(need|can|should)|the correct|instead|try|make|update|modify|rewrite|consider)\b",
    re.IGNORECASE,
)
_SPAN: Final = re.compile(r"`([^`\n]+)`")
_QUOTED: Final = re.compile(r"(?<![\w`])(\"[^\"\n]{1,40}\"|'[^'\n]{1,40}')(?![\w`])")
_TEST: Final = re.compile(r"\btest_\w+")
_CALL: Final = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_NAME: Final = re.compile(r"[A-Za-z_]\w*")

_CASES: Final[tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...]] = tuple(
    (name, re.compile(said, re.IGNORECASE), re.compile(shown))
    for name, said, shown in (
        ("newlines", r"\bnew ?lines?\b|\bline ?breaks?\b|\bmulti-?line\b", r"\\n|\\r|newline"),
        (
            "empty input",
            r"\bempty\b",
            r"''|\"\"|\[\]|\{\}|\(\)|\bset\(\)|\bempty\b|\bEmpty",
        ),
        ("negative numbers", r"\bnegative\b", r"(?<![\w.])-\d"),
        ("zero", r"\bzero\b", r"(?<![\w.])0(?:\.0)?(?![\w.])|\bZeroDivision"),
        ("None", r"\bNone\b|\bnull\b", r"\bNone\b"),
        ("whitespace", r"\bwhite ?space\b|\bspaces\b", r"['\"][^'\"\n]* [^'\"\n]*['\"]|\\t"),
        ("tabs", r"\btabs?\b", r"\\t"),
        ("quotes", r"\bquot(?:e|es|ed|ing)\b", r"\\['\"]|\"\"|''|'\"|\"'"),
        ("non-ASCII text", r"\bunicode\b|\bnon-?ascii\b|\baccent", r"[^\x00-\x7f]|\\u|\\x"),
        ("floats", r"\bfloats?\b|\bdecimals?\b", r"\d\.\d"),
    )
)
"""A case a review may name: its name, how a review says it, how an output shows it."""


class ReviewCheck(msgspec.Struct, frozen=True, kw_only=True):
    """A review's check: whether the output bears it out and, if not, why not."""

    verified: bool
    why: str = ""


def check_review(review: str, output: str, *, code: str = "") -> ReviewCheck:
    """Check ``review``'s claimed cause against the test ``output`` it reviews; ``code`` is
    the reviewed candidate (its functions and classes are what the review may blame)."""
    unshown = list(dict.fromkeys(_unshown(cause(review), output, _defined(code))))
    if not unshown:
        return ReviewCheck(verified=True)
    return ReviewCheck(
        verified=False, why=f"it names {_listed(unshown[:2])}, which no failing test's output shows"
    )


def cause(review: str) -> str:
    """The sentences of ``review`` that say why the code fails (not what to change)."""
    sentences = [s for s in _SENTENCE.split(review) if s.strip()]
    return " ".join(s for s in sentences if _CAUSE.search(s) and not _FIX.match(s))


def _unshown(claim: str, output: str, defined: set[str]) -> Iterator[str]:
    """What ``claim`` names that ``output`` does not show, each as the reason says it."""
    for test in _TEST.findall(claim):
        if not re.search(rf"\b{re.escape(test)}\b", output):
            yield f"the test {test}"
    spans = _SPAN.findall(claim)
    bare = _SPAN.sub(" ", claim)
    names = {m for s in spans for m in _names(s)} | set(_CALL.findall(bare))
    for name in sorted(names & defined):
        if not re.search(rf"\b{re.escape(name)}\b", output):
            yield f"`{name}`"
    literals = [s for s in spans if _literal(s) is not None] + _QUOTED.findall(bare)
    for literal in literals:
        value = _literal(literal)
        if isinstance(value, str) and value and value not in output and repr(value) not in output:
            yield f"the input {literal}"
    for name, said, shown in _CASES:
        if said.search(bare) and not shown.search(output):
            yield f"the case {name}"


def _names(span: str) -> list[str]:
    """The names a code span refers to as a function: ``f``, ``f()``, ``f(x)``, ``obj.f``."""
    called = _CALL.findall(span)
    if called:
        return list(called)
    span = span.strip()
    return [span.rsplit(".", 1)[-1]] if re.fullmatch(r"[\w.]+", span) else []


def _literal(text: str) -> object:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str | int | float | list | tuple | dict) else None


def _defined(code: str) -> set[str]:
    """The functions and classes ``code`` defines."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(re.findall(r"^\s*(?:def|class)\s+(\w+)", code, re.MULTILINE))
    return {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
