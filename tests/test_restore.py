"""What a candidate dropped and still uses is put back (swapos.passes.restore), on the
forms recorded candidates dropped in real runs (docs/benchmarks.md: a sentinel, a constant,
an import the starter had, a stdlib module read as ``re.sub``, ``@dataclass``)."""

from __future__ import annotations

import pytest

from swapos.passes.restore import restore_dropped, unbound_names

STARTER = '''"""TTL cache."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

_MISSING = object()
DEFAULT_TTL = 60.0


def _now() -> float:
    return time.monotonic()


class TTLCache:
    def get(self, key: Hashable, default=_MISSING):
        return default
'''


def test_a_dropped_sentinel_and_import_come_back_where_they_are_read_in_time() -> None:
    candidate = (
        '"""TTL cache."""\n\nfrom __future__ import annotations\n\n\n'
        "class TTLCache:\n    def get(self, key: Hashable, default=_MISSING):\n"
        "        return time.monotonic() if default is _MISSING else default\n"
    )
    code, restored = restore_dropped(candidate, STARTER)
    # Hashable is only an annotation, never evaluated (``from __future__ import annotations``)
    assert restored == ["_MISSING = object()", "import time"]
    assert code == (
        '"""TTL cache."""\n\nfrom __future__ import annotations\nimport time\n\n\n'
        "_MISSING = object()\n\n\nclass TTLCache:\n"
        "    def get(self, key: Hashable, default=_MISSING):\n"
        "        return time.monotonic() if default is _MISSING else default\n"
    )
    assert unbound_names(code) == frozenset()
    compile(code, "solution.py", "exec")


def test_a_dropped_helper_function_comes_back_whole_with_what_it_needs() -> None:
    candidate = "def age(stamp):\n    return _now() - stamp\n"
    code, restored = restore_dropped(candidate, STARTER)
    assert restored == [
        "def _now() -> float:\n    return time.monotonic()",
        "import time",
        "from __future__ import annotations",  # rule 4: the starter's, with its _now
    ]
    assert unbound_names(code) == frozenset()
    namespace: dict[str, object] = {}
    exec(compile(code, "solution.py", "exec"), namespace)
    assert callable(namespace["age"])


@pytest.mark.parametrize(
    ("candidate", "restored"),
    [
        ("def slug(s):\n    return re.sub(r'\\W+', '-', s)\n", ["import re"]),
        ("@dataclass\nclass P:\n    x: int\n", ["from dataclasses import dataclass"]),
        ("def f(xs):\n    return defaultdict(list)\n", ["from collections import defaultdict"]),
    ],
    ids=["stdlib-module-attribute", "dataclass", "defaultdict"],
)
def test_a_name_that_says_its_standard_module_gets_that_import(
    candidate: str, restored: list[str]
) -> None:
    code, put_back = restore_dropped(candidate, "")
    assert put_back == restored
    assert code.startswith(restored[0] + "\n")
    assert unbound_names(code) == frozenset()


@pytest.mark.parametrize(
    ("candidate", "starter"),
    [
        ("def f():\n    return helper(1)\n", "def g():\n    pass\n"),  # invented, never written
        ("def f():\n    return time()\n", ""),  # the module ``time`` is not called
        ("B = 5\n\n\ndef f():\n    return A + B\n", "A, B = 1, 2\n"),  # would rebind B
        (
            "def f(x=DEFAULT):\n    return x\n\n\nclass Interval:\n    pass\n",
            "class Interval:\n    pass\n\n\nDEFAULT = Interval()\n",
        ),  # DEFAULT must follow Interval and precede f: no such place
        ("def f(:\n", "X = 1\n"),  # does not parse
        ("def f():\n    return len([1])\n", ""),  # nothing unbound
        ("from math import *\n\n\ndef f(x):\n    return floor(x)\n", "def floor(x):\n    pass\n"),
    ],
    ids=["invented", "bare-module-name", "rebinds", "no-place", "unparsable", "nothing", "star"],
)
def test_nothing_is_put_back_that_the_rules_do_not_cover(candidate: str, starter: str) -> None:
    assert restore_dropped(candidate, starter) == (candidate, [])


def test_unbound_names_sees_every_scope_and_no_builtins() -> None:
    code = (
        "import os\nX = 1\n\n\ndef f(a):\n    return X + Y + a + len([z for z in W])\n\n\n"
        "class C:\n    q = Q\n\n    def m(self):\n        return C, os.sep, __name__\n"
    )
    assert unbound_names(code) == frozenset({"Y", "W", "Q"})


SEMVER = '''"""Versions."""


class Version:
    pass


def parse(text: str) -> Version:
    return Version()


def _key(v: Version) -> tuple[int, ...]:
    return ()


def compare(a: str, b: str) -> int:
    return 0


def latest(versions: list[str]) -> str:
    return max(versions, key=lambda v: _key(parse(v)))
'''


def test_with_exported_a_public_function_left_out_comes_back_in_the_starters_order() -> None:
    """A whole-file answer that rewrote ``parse`` and ``compare`` and left out ``latest``
    (recorded: ``cannot import name 'latest'``) gets it back, after ``compare``, and
    ``_key``, which it reads, before it."""
    candidate = (
        '"""Versions."""\n\n\nclass Version:\n    pass\n\n\n'
        "def parse(text: str) -> Version:\n    return Version()\n\n\n"
        "def compare(a: str, b: str) -> int:\n    return 1\n"
    )
    code, restored = restore_dropped(candidate, SEMVER, exported=True)
    assert [r.splitlines()[0] for r in restored] == [
        "def latest(versions: list[str]) -> str:",
        "def _key(v: Version) -> tuple[int, ...]:",
    ]
    order = [code.index(f"def {n}(") for n in ("parse", "compare", "latest")]
    assert order == sorted(order) and "return 1" in code
    assert unbound_names(code) == frozenset()


def test_without_exported_nothing_unread_comes_back() -> None:
    candidate = "class Version:\n    pass\n\n\ndef parse(text):\n    return Version()\n"
    assert restore_dropped(candidate, SEMVER) == (candidate, [])


def test_exported_does_not_bring_back_private_names_or_what_the_answer_binds_its_way() -> None:
    # binds every public name, not as the starter does
    candidate = "class Version:\n    pass\n\n\nparse = compare = latest = None\n"
    assert restore_dropped(candidate, SEMVER, exported=True) == (candidate, [])


INTERVALS = '''"""Intervals."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Interval:
    start: int
    end: int

    def overlaps(self, other: Interval) -> bool:
        return self.start < other.end and other.start < self.end


def total(xs: list[Interval]) -> int:
    return sum(x.end - x.start for x in xs)
'''


def test_a_starter_class_put_back_brings_the_future_import_it_was_written_under() -> None:
    answer = "def merge(xs: list[Interval]) -> list[Interval]:\n    return sorted(xs)\n"
    code, restored = restore_dropped(answer, INTERVALS, exported=True)
    assert restored[-1] == "from __future__ import annotations"
    assert code.startswith("from __future__ import annotations\n")
    namespace: dict[str, object] = {}
    exec(compile(code, "solution.py", "exec"), namespace)  # loads: ``other: Interval``
    assert {"Interval", "merge", "total"} <= namespace.keys()


def test_a_rewrite_of_the_starter_that_dropped_the_future_import_gets_it_back() -> None:
    # the whole file written again (merge-intervals' attempt 3), its ``from __future__``
    # left out: ``other: Interval`` no longer loads; nothing else was dropped
    rewrite = INTERVALS.replace("from __future__ import annotations\n\n", "")
    code, restored = restore_dropped(rewrite, INTERVALS)
    assert restored == ["from __future__ import annotations"]
    assert code.startswith('"""Intervals."""\nfrom __future__ import annotations\n')
    namespace: dict[str, object] = {}
    exec(compile(code, "solution.py", "exec"), namespace)
    assert "Interval" in namespace
    # an answer that defines none of the starter's functions or classes is left as written
    other = "class Span:\n    def overlaps(self, other: Span) -> bool:\n        return True\n"
    assert restore_dropped(other, INTERVALS) == (other, [])


def test_no_future_import_for_new_code_with_no_starter_statement_put_back() -> None:
    # ``import re`` is rule 2's (no statement of the starter): the candidate stays as written
    code, restored = restore_dropped("def f(s):\n    return re.sub('a', 'b', s)\n", INTERVALS)
    assert restored == ["import re"] and "__future__" not in code
    # a docstring stays first
    answer = '"""Doc."""\n\n\ndef merge(xs: list[Interval]) -> list[Interval]:\n    return xs\n'
    code, _ = restore_dropped(answer, INTERVALS)
    assert code.startswith('"""Doc."""\nfrom __future__ import annotations\n')
