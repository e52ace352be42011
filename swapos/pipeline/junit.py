"""Reading pytest's JUnit XML report (``--junitxml``) into counts and failure summaries."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import msgspec


class JUnitCase(msgspec.Struct, frozen=True, kw_only=True):
    """One ``<testcase>`` that did not pass.

    Attributes:
        name: ``classname::name`` as pytest reports it.
        kind: ``failure``, ``error`` or ``skipped``.
        message: the element's ``message`` attribute (the short reason).
        text: the element's body (traceback), possibly long.
    """

    name: str
    kind: str
    message: str
    text: str


class JUnitReport(msgspec.Struct, frozen=True, kw_only=True):
    """Totals over every ``<testsuite>`` of a report, plus the cases that did not pass."""

    tests: int
    failures: int
    errors: int
    skipped: int
    problems: list[JUnitCase]

    @property
    def passed(self) -> int:
        return max(0, self.tests - self.failures - self.errors - self.skipped)


def parse_junit(path: Path) -> JUnitReport | None:
    """Parse a JUnit XML report; None if it is missing or not well-formed XML."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    problems: list[JUnitCase] = []
    for suite in suites:
        for key in totals:
            totals[key] += _int(suite.get(key))
        for case in suite.iter("testcase"):
            for kind in ("failure", "error", "skipped"):
                el = case.find(kind)
                if el is not None:
                    cls, name = case.get("classname", ""), case.get("name", "")
                    problems.append(
                        JUnitCase(
                            name=f"{cls}::{name}" if cls else name,
                            kind=kind,
                            message=el.get("message", ""),
                            text=el.text or "",
                        )
                    )
    return JUnitReport(problems=problems, **totals)


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0
