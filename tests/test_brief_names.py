"""The names a brief asks to add (swapos.passes.brief_names), on sentences in the forms of
public issues, READMEs and exercises (paraphrased where long), and on the traps they hold."""

from __future__ import annotations

import pytest

from swapos.passes.brief_names import asked_names

STARTER = '''"""Helpers."""


class Stack:
    def __init__(self) -> None:
        self.items: list[int] = []

    def push(self, item: int) -> None:
        self.items.append(item)


def percent(part: float, whole: float) -> float:
    return 100 * part / whole
'''

# fmt: off
ASKED = [
    # a README's "add a function" with its signature and where it goes
    ("Add a function `format_dollars(amount)` to `humanfriendly/__init__.py`.",
     ("format_dollars",)),
    # an exercise: the signature, then "to the module" on the next line
    ("Add a function `relative_path()`\nto the `gizmo` module that returns a list of files.",
     ("relative_path",)),
    # a tutorial: "with one parameter" follows, the kind word is before the span
    ("Then, we can add a function `store_csv_data()` with one parameter: the list of values.",
     ("store_csv_data",)),
    # a kind word and a bare name
    ("Now add a function `setupDebugMessenger` to be called from `initVulkan`.",
     ("setupDebugMessenger",)),
    # a numbered step with a return annotation
    ("1. Add a function `check_rule(db: Engine) -> list[str]` in `rules.py`\n2. Add an entry",
     ("check_rule",)),
    # "implement" and a signature
    ("Implement `pull_diagnostics(uri)` using the `workspace/diagnostic` request.",
     ("pull_diagnostics",)),
    # "please add" and a return type
    ("Durations come in as text. Please add `parse_interval(text) -> int`, returning seconds.",
     ("parse_interval",)),
    # a class named bare, confirmed by a call elsewhere in the brief
    ("Add a `TokenLimiter` with the same interface:\n\n- `TokenLimiter(rate, burst)`: "
     "allows `burst` calls at once.", ("TokenLimiter",)),
    # a kind word after the span
    ("Add a `RingBuffer` class and switch `Stack` to it.", ("RingBuffer",)),
    # a constant
    ("Add a module-level constant `TAX_RATE = 0.2` and use it in both functions.",
     ("TAX_RATE",)),
    # a definition shown in a block right after the sentence that asks for it
    ("Introduce a dataclass\n\n```python\n@dataclass\nclass Point:\n    x: float\n```\n",
     ("Point",)),
    # a heading that names it, and the body that asks for it
    ("# `chunked`\n\nRecords go out in batches. Add a helper\n`chunked(items, size)` that "
     "yields lists.", ("chunked",)),
    # a verb inside a span is not the one that asks
    ("`add(a, b)` sums; add a function `mean(xs)` too.", ("mean",)),
    # a verb that moves code, "into" and what it moves into (rule 5)
    ("Wrapping it into a function `generate_species_list(region_name, ebd_path)` would make "
     "it reusable.", ("generate_species_list",)),
    ("Extract the state handling from `App()` into a function `useOperator()`.",
     ("useOperator",)),
    ("Split `report()` into three functions: `parse_lines(text)`, `summarise` and `render`.",
     ("parse_lines", "summarise", "render")),
    # a list introduced by a sentence that asks for functions (rule 6)
    ("Split it into three top-level functions and make `report` call them:\n\n"
     "- `order_total(orders) -> float`: the sum of the amounts;\n"
     "- `large_ids(orders)`: the ids of the large ones, in order;\n  wrapped on.\n"
     "- `format_report(count, total)`: the text.\n\nAfter that, nothing else.",
     ("order_total", "large_ids", "format_report")),
    # "replace ... with" a kind, and its definition in a block
    ("Replace it with a frozen dataclass:\n\n```python\n@dataclass(frozen=True)\n"
     "class Settings:\n    port: int = 8080\n```\n", ("Settings",)),
    # a signature alone in the block (no body: it does not parse)
    ("Extract that logic into a top-level function\n\n```python\n"
     "def parse_record(line: str, columns: int) -> list[str] | None\n```\n",
     ("parse_record",)),
    # two sentences, two names
    ("Add `encode(data) -> str`. Also add a function `decode(text)`.", ("encode", "decode")),
]

NOT_ASKED = [
    # real issues' "add a `...`" that is no module-level name
    "Optionally, add a `Status` checkmark in the main `README.md`.",
    "Add a `SessionStart` hook that injects the skill into every conversation.",
    "Either add a `/jobs` prefix in routes or update the frontend.",
    "Add a `clone` method to cosmology objects to allow copies.",
    "Add a `transformationHints.note` that names the concrete strategy.",
    "Add a `practice_id` line in the insert payload.",
    "Implement a `diagnosticWatch` map (`uri -> chan struct{}`) in the `lsp.Client`.",
    # dotted, a method, a member of the starter's class
    "# Add `TokenBucket.allow`",
    "Add the method `allow(self, cost: float = 1.0) -> bool`.",
    "Add `peek()` and `size()` to `Stack`.",
    "Add a `full` property that says whether it is at capacity.",
    # what the starter already has, a builtin, a negation
    "Add `percent(part, whole)` rounding.",
    "Do not add `deque(maxlen)`, we port this to MicroPython.",
    "Fix it without adding a helper `normalise(x)`.",
    "Add `len(stack)` support.",
    # a verb that moves code names what it moves first, not something new
    "Move `percent` into `utils.py`.",
    "Extract `parse()` into its own module.",
    # no verb that asks: a description
    "MC-Java calls into a function `blck_xlate` which translates the code.",
    # a list after a sentence that asks for no function
    "Suggestion:\n\n1. one function per format: `export_csv(rows)`, `export_json(rows)`\n",
    "Add these methods:\n\n- `peek()`: the top item\n- `size()`: how many\n",
    # a verb with no span after it, a span before the verb
    "`merge(a, b)` is slow: add caching.",
    "Write tests for the parser.",
    # a block after a sentence that ends with a full stop, or that adds tests
    "Add a function. It is used like this.\n\n```python\ndef usage():\n    pass\n```\n",
    "Add tests like this function:\n\n```python\ndef test_it():\n    assert True\n```\n",
]
# fmt: on


@pytest.mark.parametrize(("brief", "names"), ASKED, ids=[a[1][0] for a in ASKED])
def test_a_brief_that_asks_to_add_a_name(brief: str, names: tuple[str, ...]) -> None:
    assert asked_names(brief, STARTER) == names


@pytest.mark.parametrize("brief", NOT_ASKED)
def test_a_brief_that_asks_for_no_module_level_name(brief: str) -> None:
    assert asked_names(brief, STARTER) == ()


def test_a_starter_that_does_not_parse_still_counts_its_names() -> None:
    assert asked_names("Add a function `push(x)`.", "def push(x:\n") == ()
    assert asked_names("Add a function `pop(x)`.", "def push(x:\n") == ("pop",)
