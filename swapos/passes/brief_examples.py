"""The examples a repository task's markdown brief states, in the forms real briefs use.

The forms (collected from public READMEs, docs and issue reports; the lines and where they
came from are the fixtures of ``tests/test_brief_examples.py``):

- two code spans joined by an arrow or a verb: ```` `f(2)` -> `4` ````, ``→``, ``=>``,
  ``==>``, ``⇒``, ``➞``, ``gives``, ``returns``, ``will return``, ``should return``,
  ``should be``, ``should give``, ``must return``, ``is expected to return``,
  ``expected:``; the prose is read a paragraph or list item at a time, so a pair wrapped
  over two lines counts;
- one code span holding both: ```` `f(2) == 4` ````, ```` `f(2) -> 4` ````, ``→``;
- doctest lines, in a fenced block or not: ``>>> f(2)`` and the value on the next line, or
  ``>>> f(2) == 4``, or ``>>> print(f(2))`` and the lines it prints (checked as the text
  ``print`` shows, each line's trailing spaces aside); a statement may go on over ``...``
  lines; ``assert f(2) == 4`` lines in a fenced block; and a doctest session's later lines
  with its earlier ones as their setup (``>>> cache.put("a", 1)`` then ``>>> cache.get("a")``
  and ``1``: :mod:`swapos.passes.brief_scenarios` has the rules), and so statements joined
  by ``;`` in a span, ```` `q = Queue(); q.put(1); q.get()` -> `1` ````;
- a call in a fenced block with its value in a comment after a marker (``->``, ``=>``,
  ``→``, ``==``, ``returns``, ``output:``, ``result:``...): ``solve("C")  # -> "G"``;
  ``print(f(2))  # Output: 4`` is checked as the text ``print`` shows of the value;
- a markdown table with a column of calls and a column headed ``output``, ``result``,
  ``returns``, ``expected`` (or ``expected output``/``result``/``value``); or, when the
  brief names just one function with one parameter (`` `normalize(path)` ``), a table
  with a column of its arguments headed ``input`` (``argument``, ``arg``, ``given``) and
  such an output column;
- any of these in a blockquote (``> >>> f(2)`` then ``> 4``; a fence in a quote): a quote's
  lines are read as what they quote;
- calls on names the brief's code gives a value (*givens*): a fenced block of nothing but
  ``name = value`` lines (``config = {"retries": 0}``, then ```` `get_path(config,
  "retries")` should be `0` ````), or a doctest's ``>>> target = {'a': 1}`` before
  ``>>> glom(target, 'a')``. The example reads the value in the name's place. A name is no
  given when it is given two values, or when other code names it where it may change: a
  fenced block that does more than assign values (``delays = []`` then
  ``run(sleep=delays.append)``), a doctest line with no value after it (``>>> put(cache,
  'a', 1)``).

An example counts only when its call is a plain function name applied to values and its
value is a value: literals, arithmetic on numbers, and constructions of the value types the
starter makes available (``[Interval(1, 6)]``, ``date(2024, 3, 1)``;
:mod:`~swapos.passes.example_values` says which); the name
must be one the starter defines, or, outside a bugfix, one that is not a Python builtin (the
function the brief asks for). A call given two different values is dropped (the brief is
unclear, so no example), and so is one stated in a sentence that places it in the present
(``instead of``, ``rather than``, ``currently``, ``today``, ``right now``, ``wrong``,
``bug``...: "``add_tag("b")`` returns ``["a", "b"]`` instead of ``["b"]``" quotes the bug).
Nothing is made up: a wrong example would send correct candidates back. Not read: calls
qualified by a module (``humanize.naturalsize(1)``), arguments that name variables no code
gives a value, and values given in comments outside a fenced block or after no marker
(``f(1)  # 2``).

Where an example sits matters, because briefs quote wrong behaviour too. Each line belongs
to the section of the last *label* above it: a markdown heading, a line that is only bold
text, or a short line ending in ``:`` or ``?`` (``Expected:``, ``What did you expect to
happen?``). A label that speaks of the wanted result (``expected``, ``should``, ``example``,
``usage``, ``proposal``...) opens a *wanted* section; one that speaks of the present
(``actual``, ``currently``, ``to reproduce``, ``bug``, ``traceback``...) an *actual* one;
anything else (or both) a *neutral* one; a ``...:`` line that says neither leaves the
section as it was (``Given this file:``), and the brief's title (a first line that is a
level-1 heading or bold) is neutral whatever it says (``# Bug: f() is off by one``).
Examples are never read from an actual section. A ``feature`` or ``refactor`` brief gives
examples from wanted and neutral sections; a ``bugfix`` brief only from wanted sections,
plus, anywhere but an actual section, the lines whose own verb states the wanted result
(``should return``, ``should be``, ``should give``, ``must return``, ``is expected to
return``) and table rows under an ``expected`` column.
"""

from __future__ import annotations

import ast
import builtins
import itertools
import re
from collections.abc import Iterator
from typing import Final, Literal

import msgspec

from swapos.passes.brief_scenarios import Line, parsed_statements, scenarios
from swapos.passes.example_values import (
    EVAL_ERRORS,
    Example,
    is_value,
    make_example,
    value_makers,
)
from swapos.pipeline.bindings import definitions
from swapos.pipeline.extract import PARSE_ERRORS

Section = Literal["wanted", "actual", "neutral"]

MAX_EXAMPLES: Final = 12

_WANTED: Final = re.compile(
    r"\b(?:expect\w*|should|wanted|desired|correct(?:ly)?|examples?|usage|proposal|"
    r"proposed|after(?: the fix)?|fixed)\b",
    re.IGNORECASE,
)
_ACTUAL: Final = re.compile(
    r"\b(?:actual(?:ly)?|current(?:ly)?|instead|happens|happened|observed|reproduc\w*|"
    r"traceback|errors?|bugs?|broken|before|wrong|problems?)\b",
    re.IGNORECASE,
)
_FENCE: Final = re.compile(r"^\s*(```|~~~)")
_HEADING: Final = re.compile(r"^\s{0,3}#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
_BOLD_LINE: Final = re.compile(r"^\s*\*\*(?P<text>[^*]+)\*\*\s*:?\s*$")
_TITLE: Final = re.compile(r"^\s{0,3}(?:#\s|\*\*)")
"""A level-1 heading or a bold line: on a brief's first line, its title (neutral: "Bug:
f() is wrong" names the issue, it does not open a section that reports the bug)."""
_LABEL_LINE: Final = re.compile(r"^\s*(?P<text>[A-Za-z][^`|]{0,70}?[:?])\s*$")

_SPAN: Final = r"`(?P<{0}>[^`\n]+)`"
_WANTED_VERBS: Final = (
    r"should\s+(?:return|be|give|yield|produce)|must\s+(?:return|be|give)|"
    r"is\s+expected\s+to\s+(?:return|be)|expected(?:\s+result)?\s*:?"
)
_VERBS: Final = rf"->|→|➞|=>|==>|⇒|gives|returns|will\s+return|{_WANTED_VERBS}"
_PAIR: Final = re.compile(
    _SPAN.format("call") + rf"\s*(?P<verb>{_VERBS})\s*" + _SPAN.format("want"), re.IGNORECASE
)
_STATES_WANTED: Final = re.compile(rf"^(?:{_WANTED_VERBS})$", re.IGNORECASE)
_ONE_SPAN: Final = re.compile(r"^(?:assert\s+)?(?P<call>.+?\))\s*(?:==|->|→|=>)\s*(?P<want>.+)$")
_EQUALS: Final = re.compile(r"^(?P<call>.+?\))\s*==\s*(?P<want>.+)$")
_DOCTEST: Final = re.compile(r"^\s*(?:[*-]\s+)?>>>\s?(?P<src>.*)$")
_CONTINUED: Final = re.compile(r"^\s*\.\.\.(?:\s(?P<src>.*))?$")
_PRINTED: Final = re.compile(r"^print\((?P<call>\w+\(.*\))\)$")
_ASSERT: Final = re.compile(r"^\s*assert\s+(?P<call>.+?\))\s*==\s*(?P<want>.+)$")
_COMMENTED: Final = re.compile(
    r"^\s*(?P<call>[A-Za-z_]\w*\(.*\))\s*#\s*"
    r"(?:==>|=>|==|->|→|⇒|➞|(?:returns|gives|output|result)\b:?)\s*(?P<want>\S.*?)\s*$",
    re.IGNORECASE,
)
"""A call in a fenced block with its value in a comment after a marker: ``solve("C")  #
-> "G"``, ``print(f(nums))  # Output: 45``."""
_PRESENT: Final = re.compile(
    r"\b(?:instead\s+of|rather\s+than|currently|today|right\s+now|at\s+the\s+moment|"
    r"but\s+(?:it\s+)?(?:gives|returns|got)|wrong(?:ly)?|incorrect(?:ly)?|broken|bug)\b",
    re.IGNORECASE,
)
"""Words that place a stated value in the present (the bug), not in the wish."""
_SENTENCE_END: Final = re.compile(r"[.!?;:](?:\s+|$)")
_ITEM: Final = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_TABLE_ROW: Final = re.compile(r"^\s*\|(?P<cells>.*)\|\s*$")
_TABLE_RULE: Final = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_OUTPUT_HEADER: Final = re.compile(
    r"^(?:output|result|returns?|expected(?:\s+(?:output|result|value))?)$", re.IGNORECASE
)
_INPUT_HEADER: Final = re.compile(r"^(?:input|argument|arg|given)$", re.IGNORECASE)
_SIGNATURE: Final = re.compile(r"`(\w+)\(\s*\w+\s*(?::\s*[\w.\[\], |]+)?\)`")
"""A function named with its one parameter, in a code span: `` `normalize(path)` ``,
`` `slug(text: str)` ``."""
_NAMED_CALL: Final = re.compile(r"`(\w+)\(")
_BUILTINS: Final = frozenset(dir(builtins))
_QUOTE: Final = re.compile(r"^ {0,3}(?:>(?!>>) ?)+")
"""A markdown blockquote's markers (``> ``, ``> > ``), not a doctest prompt (``>>> ``)."""


def brief_examples(problem: str, starter: str, category: str) -> list[Example]:
    """The examples ``problem`` (a markdown brief) states, by the rules of this module.

    Args:
        problem: the brief.
        starter: the starting ``solution.py`` (the names it defines are known functions).
        category: the task's category (``bugfix`` reads fewer places, see above).

    Returns:
        At most :data:`MAX_EXAMPLES` examples, in order, without repeats.
    """
    known = _defined_names(starter)
    makers = value_makers(starter)
    bugfix = category == "bugfix"
    lines = [_QUOTE.sub("", line) for line in problem.splitlines()]
    givens = _givens(lines, makers)

    def callee(name: str) -> bool:
        return name in known or (not bugfix and name not in _BUILTINS)

    found: list[Example] = []
    sessions: list[tuple[Section, list[Line]]] = []
    for section, explicit, call, want in _candidates(lines, sessions):
        if section == "actual" or (bugfix and section != "wanted" and not explicit):
            continue
        inner = _printed_call(call)
        example = make_example(inner or call, want, callee, makers, givens)
        if example is not None and inner is not None:
            example = msgspec.structs.replace(example, printed=True)
        if example is None and ";" in call:  # `q = Queue(); q.put(1); q.get()` -> `1`
            example = _one_line_scenario(call, want, known, not bugfix, makers)
        if example is not None and example not in found:
            found.append(example)
    for section, session in sessions:
        if section == "actual" or (bugfix and section != "wanted"):
            continue
        found.extend(ex for ex in scenarios(session, known, not bugfix, makers) if ex not in found)
    return _unambiguous(found)[:MAX_EXAMPLES]


def _one_line_scenario(
    code: str, want: str, known: frozenset[str], may_add: bool, makers: frozenset[str]
) -> Example | None:
    """The scenario of statements joined by ``;`` whose last one has the value ``want``."""
    statements = _parsed(code)
    if len(statements) < 2:
        return None
    session = [Line(ast.unparse(st), []) for st in statements[:-1]]
    session.append(Line(ast.unparse(statements[-1]), [want]))
    found = scenarios(session, known, may_add, makers)
    return found[0] if found else None


def _printed_call(call: str) -> str | None:
    """``f(2)`` of ``print(f(2))``; None for any other text."""
    m = _PRINTED.match(call.strip())
    return m.group("call") if m is not None else None


def _candidates(
    lines: list[str], sessions: list[tuple[Section, list[Line]]]
) -> Iterator[tuple[Section, bool, str, str]]:
    """``(section, states_wanted, call, want)`` for every example-shaped piece of ``lines``;
    ``states_wanted`` when the piece's own words say it is the wanted result. Prose is read
    a paragraph (or a list item) at a time, so an example wrapped over two lines counts.
    Each doctest session met (its ``>>>`` statements, up to the fence, a label, a table or
    prose that is no statement's output) is added to ``sessions`` with its section."""
    section: Section = "neutral"
    unary = _unary_function(lines)
    fenced = False
    para: list[str] = []  # the prose lines of the paragraph or list item being read
    started = False  # a line with text was seen (the first one may be the brief's title)
    session: list[Line] = []
    session_section: Section = section
    owned = 0  # lines before this index are the session's statements and their output

    def close() -> None:
        nonlocal session
        if session:
            sessions.append((session_section, session))
        session = []

    for i, line in enumerate(lines):
        if (
            _FENCE.match(line)
            or _TABLE_ROW.match(line)
            or (not fenced and i >= owned and line.strip() and not _DOCTEST.match(line))
        ):
            close()
        special = (
            _FENCE.match(line)
            or (not fenced and _label(line) is not None)
            or _DOCTEST.match(line)
            or fenced
            or _TABLE_ROW.match(line)
            or not line.strip()
            or _ITEM.match(line)
        )
        if special and para:
            yield from _inline(section, " ".join(para))
            para = []
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (label := _label(line)) is not None:
            text, strong = label
            kind = "neutral" if not started and _TITLE.match(line) else _classify(text)
            if strong or kind != "neutral":
                section = kind  # a heading always opens a section; a "...:" line if it says which
        elif (m := _DOCTEST.match(line)) is not None:
            src, after = _doctest_statement(m.group("src"), lines[i + 1 :])
            yield from _doctest(section, src, after, _indent(line))
            shown = list(itertools.takewhile(_printed_line, after))
            if not session:
                session_section = section
            session.append(Line(src, [_dedented(s, _indent(line)) for s in shown]))
            owned = len(lines) - len(after) + len(shown)
        elif fenced:
            if (m := _ASSERT.match(line) or _COMMENTED.match(line)) is not None:
                yield from _fenced(section, m.group("call"), m.group("want"))
        elif _TABLE_ROW.match(line):
            if i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
                yield from _table(section, lines, i, unary)
        elif line.strip():
            para.append(line.strip())
        started = started or bool(line.strip())
    if para:
        yield from _inline(section, " ".join(para))
    close()


def _fenced(section: Section, call: str, want: str) -> Iterator[tuple[Section, bool, str, str]]:
    """The example of an ``assert`` line or a commented call in a fenced block; a printed
    call's value is what ``print`` shows of it (only a literal's is known here)."""
    if _printed_call(call) is None:
        yield section, False, call, want
        return
    try:
        shown = str(ast.literal_eval(want))
    except EVAL_ERRORS:
        return
    yield section, False, call, repr(shown)


def _givens(lines: list[str], makers: frozenset[str]) -> dict[str, str]:
    """The names the brief's code gives a value, and that value's source (see the module's
    docstring: a fenced block of nothing but ``name = value`` lines, a doctest's ``>>> name
    = value``); none that another statement may change or that is given two values."""
    assigned: dict[str, set[str]] = {}
    tainted: set[str] = set()
    for statements, block in _code_of(lines):
        values = [_assigned_value(stmt, makers) for stmt, _ in statements]
        pure = not block or all(value is not None for value in values)
        for (stmt, silent), value in zip(statements, values, strict=True):
            if value is not None and pure:
                assigned.setdefault(value[0], set()).add(value[1])
            elif value is not None or silent:
                tainted.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name))
    return {
        name: next(iter(values))
        for name, values in assigned.items()
        if len(values) == 1 and name not in tainted
    }


def _code_of(lines: list[str]) -> Iterator[tuple[list[tuple[ast.stmt, bool]], bool]]:
    """The brief's code, a piece at a time: ``(statements, block)``, each statement with
    whether it is *silent* (a statement, or a doctest line with no value after it: it may
    change what it names). A fenced block without doctest lines is one piece (``block``);
    each doctest line is a piece of its own."""
    fence: list[str] | None = None
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            if fence is not None and not any(_DOCTEST.match(f) for f in fence):
                statements = _parsed("\n".join(fence))
                yield [(st, True) for st in statements], True
            fence = [] if fence is None else None
            continue
        if fence is not None:
            fence.append(line)
        if (m := _DOCTEST.match(line)) is None:
            continue
        src, rest = _doctest_statement(m.group("src"), lines[i + 1 :])
        after = rest[0].strip() if rest else ""
        silent = not after or after.startswith((">>>", "```", "~~~"))
        yield [(st, silent) for st in _parsed(src)], False


def _parsed(source: str) -> list[ast.stmt]:
    return parsed_statements(source) or []


def _assigned_value(stmt: ast.stmt, makers: frozenset[str]) -> tuple[str, str] | None:
    """``(name, value source)`` when ``stmt`` is ``name = value``."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and is_value(stmt.value, makers)
    ):
        return stmt.targets[0].id, ast.unparse(stmt.value)
    return None


def _label(line: str) -> tuple[str, bool] | None:
    """``(text, strong)`` if ``line`` is a heading or a bold-only line (strong), or a short
    label line ending in ``:`` or ``?``; else None."""
    for pattern, strong in ((_HEADING, True), (_BOLD_LINE, True), (_LABEL_LINE, False)):
        if (m := pattern.match(line)) is not None:
            return m.group("text"), strong
    return None


def _classify(label: str) -> Section:
    wanted, actual = bool(_WANTED.search(label)), bool(_ACTUAL.search(label))
    if wanted == actual:
        return "neutral"
    return "wanted" if wanted else "actual"


def _doctest(
    section: Section, src: str, after: list[str], indent: int
) -> Iterator[tuple[Section, bool, str, str]]:
    """The example of one doctest line ``src``: ``>>> f(2) == 4``, ``>>> f(2)`` with the value
    on the next line, or ``>>> print(f(2))`` with the lines it prints (up to a blank line,
    the next ``>>>`` or the fence; indented as deep as the ``>>>``), as a string."""
    if (m := _EQUALS.match(src.strip())) is not None:
        yield section, False, m.group("call"), m.group("want")
        return
    printed = _PRINTED.match(src.strip())
    if printed is not None:
        shown = list(itertools.takewhile(_printed_line, after))
        if shown:
            text = "\n".join(_dedented(line, indent).rstrip() for line in shown)
            yield section, False, src.strip(), repr(text)
        return
    value = after[0].strip() if after else ""
    if value and not value.startswith((">>>", "...", "```")):
        yield section, False, src, value


def _doctest_statement(src: str, after: list[str]) -> tuple[str, list[str]]:
    """A doctest statement that starts with ``src`` and goes on over the ``...`` lines of
    ``after``, and the lines after it."""
    parts = [src]
    for n, line in enumerate(after):
        if (m := _CONTINUED.match(line)) is None:
            return "\n".join(parts), after[n:]
        parts.append(m.group("src") or "")
    return "\n".join(parts), []


def _printed_line(line: str) -> bool:
    text = line.strip()
    return bool(text) and not text.startswith((">>>", "```", "~~~"))


def _dedented(line: str, indent: int) -> str:
    return line[indent:] if not line[:indent].strip() else line.strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _inline(section: Section, text: str) -> Iterator[tuple[Section, bool, str, str]]:
    """The examples of one paragraph or list item: pairs of spans, then single spans that
    are no part of a pair; none from a sentence that places its value in the present."""
    masked = _mask_spans(text)
    taken: list[tuple[int, int]] = []
    for m in _PAIR.finditer(text):
        taken.append((m.start(), m.end()))
        if _PRESENT.search(_sentence(masked, m.start(), m.end())):
            continue  # "today `f(1)` returns `2` instead of `3`": the bug, not the wish
        explicit = bool(_STATES_WANTED.match(" ".join(m.group("verb").split())))
        yield section, explicit, m.group("call"), m.group("want")
    for span in re.finditer(r"`([^`\n]+)`", text):
        if any(a <= span.start() < b for a, b in taken):
            continue
        one = _ONE_SPAN.match(span.group(1).strip())
        if one is not None and not _PRESENT.search(_sentence(masked, *span.span())):
            yield section, False, one.group("call"), one.group("want")


def _mask_spans(text: str) -> str:
    """``text`` with every code span's inside replaced by ``x`` (same length)."""
    return re.sub(r"`[^`\n]*`", lambda m: "`" + "x" * (len(m.group()) - 2) + "`", text)


def _sentence(masked: str, start: int, end: int) -> str:
    """The sentence of ``masked`` around ``masked[start:end]``, spans masked."""
    ends = [m.end() for m in _SENTENCE_END.finditer(masked)]
    left = max([e for e in ends if e <= start], default=0)
    right = min([e for e in ends if e > end], default=len(masked))
    return masked[left:right]


def _table(
    section: Section, lines: list[str], start: int, unary: str | None
) -> Iterator[tuple[Section, bool, str, str]]:
    """The rows of the table whose header is ``lines[start]``: a call column (or, when the
    brief names one function of one parameter, ``unary``, an ``input`` column of its
    arguments) and an output one."""
    header = [_plain(c) for c in _cells(lines[start])]
    outputs = [j for j, h in enumerate(header) if _OUTPUT_HEADER.match(h)]
    if not outputs:
        return
    out = outputs[-1]
    inputs = [j for j, h in enumerate(header) if j != out and _INPUT_HEADER.match(h)]
    explicit = header[out].lower().startswith("expected")
    for row in lines[start + 2 :]:
        if not _TABLE_ROW.match(row):
            break
        cells = [_plain(c) for c in _cells(row)]
        if len(cells) != len(header):
            continue
        calls = [c for j, c in enumerate(cells) if j != out and c.endswith(")") and "(" in c]
        if len(calls) == 1:
            yield section, explicit, calls[0], cells[out]
        elif not calls and unary and inputs and _one_value(cells[inputs[0]]):
            yield section, explicit, f"{unary}({cells[inputs[0]]})", cells[out]


def _one_value(text: str) -> bool:
    """Whether ``text`` parses as one expression that is no bare tuple (``"a", 1`` is two
    arguments, not one)."""
    try:
        node = ast.parse(text, mode="eval").body
    except PARSE_ERRORS:
        return False
    return not isinstance(node, ast.Tuple) or text.lstrip().startswith("(")


def _unary_function(lines: list[str]) -> str | None:
    """The function whose inputs an ``input`` column of a table lists: the one the brief
    names with one parameter (`` `normalize(path)` ``), when every function it names in a
    code span (`` `f(...)` ``) is that one; else None (a brief about several functions does
    not say whose inputs a table holds)."""
    text = "\n".join(lines)
    named = {m.group(1) for m in _NAMED_CALL.finditer(text)}
    unary = {m.group(1) for m in _SIGNATURE.finditer(text)}
    return next(iter(unary)) if len(unary) == 1 and named == unary else None


def _cells(row: str) -> list[str]:
    m = _TABLE_ROW.match(row)
    return [c.strip() for c in m.group("cells").split("|")] if m else []


def _plain(cell: str) -> str:
    """A cell's text without emphasis and, when it is one code span, without its backticks."""
    text = cell.strip().strip("*_").strip()
    if len(text) >= 2 and text[0] == "`" and text[-1] == "`" and "`" not in text[1:-1]:
        return text[1:-1].strip()
    return text


def _unambiguous(found: list[Example]) -> list[Example]:
    """``found`` without the calls the brief gives two different values (after the same
    setup: a scenario's ``cache.get("a")`` may have one value, then another)."""
    wants: dict[tuple[tuple[str, ...], str], set[str]] = {}
    for ex in found:
        wants.setdefault((ex.setup, ex.call), set()).add(ex.want)
    return [ex for ex in found if len(wants[ex.setup, ex.call]) == 1]


def _defined_names(starter: str) -> frozenset[str]:
    """The top-level functions and classes ``starter`` defines ("" if it does not parse)."""
    try:
        tree = ast.parse(starter)
    except PARSE_ERRORS:
        return frozenset()
    return frozenset(definitions(tree))
