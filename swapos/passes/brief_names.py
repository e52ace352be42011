"""The names a repository task's brief asks to add: what its tests will import, before any run.

An issue that asks for something new names it: "Add a `RingBuffer` class", "Please add
`parse_duration(text) -> int`", "Add a helper `format_table(rows, headers, align=None)`",
"Introduce a dataclass `Point`". A candidate that does not define it fails every test at
import (``cannot import name 'RingBuffer'``), and with no example to check it would be graded
so. :func:`asked_names` reads those names; the pre-grade check
(:func:`swapos.passes.defects.candidate_defect`) holds a candidate that lacks one.

A name is read from a *sentence* (of a paragraph or a list item; a heading is one too) that
says to add it: one of :data:`VERBS` as a word outside code spans, not negated before it
("do not add", "instead of", "without"), then the first code span after the verb (a verb
that moves code names what it moves there: rule 5 reads those). The span is the name alone,
its signature (``name(args)``, an optional ``-> type``) or ``NAME = value`` after
"constant".
Then it must say it is a module-level thing, one of (or rule 4):

1. the span is a signature (``parse_duration(text) -> int``);
2. a kind word of :data:`KINDS` is right before or after the span ("a helper `x`",
   "a `RingBuffer` class");
3. the brief calls it elsewhere, in a code span or a code block (``SlidingWindowLimiter(limit,
   window)`` in a list under "Add a `SlidingWindowLimiter` with the same interface:");
4. (no span) a sentence with a verb and a kind word, not ended by a full stop and not about
   tests, examples or members, is followed by a code block: the functions and classes the
   block defines, tests aside ("Introduce a dataclass" and ``class Point:`` in a block; a
   signature alone, ``def parse_record(line: str) -> list[str]``, names one too);
5. a verb that moves code (:data:`MOVERS`: "extract", "split", "factor", "wrap"...) and a
   kind word, then "into": every name or signature in a code span after "into" ("Wrapping
   it into a function `generate_species_list(region, path)`", "Split `report()` into
   three functions: `parse_lines`, `summarise` and `render`"), members aside;
6. (a list) a sentence with a verb and a kind word, not about tests, examples or members,
   that ends with ":" is followed by a list: each item that begins with a code span, its
   name or signature ("Split it into three top-level functions:" then "- `order_total(orders)
   -> float`: the sum...").

Never read: a dotted name (``TokenBucket.allow``, ``utils.parse_duration``), a name the starter
binds anywhere (a method it has, a function it changes), a builtin, a keyword, a sentence that
says it adds a method, property or attribute (or one of :data:`MEMBER_WORDS` follows the
span), or that adds it to a class of the starter ("Add `peek()` to `Stack`"). Real issues say
"add a `Status` checkmark", "add a `SessionStart` hook", "add a `/jobs` prefix": none of those
is a module-level name by these rules.
"""

from __future__ import annotations

import ast
import builtins
import functools
import itertools
import keyword
import re
from typing import Final

from swapos.pipeline.bindings import definitions, names_bound
from swapos.pipeline.extract import PARSE_ERRORS

MOVERS: Final = frozenset(
    {"extract", "extracting", "factor", "split", "splitting", "move", "pull", "wrap",
     "wrapping", "turn", "break", "refactor"}
)  # fmt: skip
"""The words that ask to move code into something new (rule 5)."""
VERBS: Final = frozenset(
    {"add", "adds", "adding", "implement", "implementing", "write", "create", "introduce",
     "provide", "expose", "export", "define", "replace"}
) | MOVERS  # fmt: skip
"""The words that ask for something new."""
KINDS: Final = frozenset(
    {"function", "functions", "class", "classes", "helper", "helpers", "decorator",
     "exception", "constant", "dataclass", "enum", "coroutine", "generator", "type"}
)  # fmt: skip
"""The words that say a name is a module-level thing."""
MEMBER_WORDS: Final = frozenset(
    {"method", "methods", "property", "properties", "attribute", "attributes", "field",
     "fields", "argument", "arguments", "parameter", "parameters", "option", "options",
     "flag", "key", "keys", "column", "columns", "member", "members"}
)  # fmt: skip
"""Words that say a sentence adds to something else, not a module-level name."""
_METHOD_WORDS: Final = frozenset(
    {"method", "methods", "property", "properties", "attribute", "attributes"}
)
_NOT_SHOWN: Final = _METHOD_WORDS | {"test", "tests", "example", "examples", "usage"}
"""Words that say a block after a sentence shows something else than what to add."""
_NEGATIONS: Final = re.compile(r"\b(?:not|n't|never|no|instead of|without|avoid|rather than)\b")
_SPAN: Final = re.compile(r"(`+)(.+?)\1", re.S)
_FENCE_BLOCK: Final = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M)
_SIGNATURE: Final = re.compile(r"^([A-Za-z_]\w*)\s*\((.*)\)\s*(?:->\s*\S.*)?$", re.S)
_NAME: Final = re.compile(r"^[A-Za-z_]\w*$")
_CONSTANT: Final = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=]+)?=\s*\S")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?;])\s+(?=\S)|\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)]|#)\s)")
_WORD: Final = re.compile(r"[A-Za-z']+")
_BUILTINS: Final = frozenset(dir(builtins))


@functools.lru_cache(maxsize=64)
def asked_names(problem: str, starter: str) -> tuple[str, ...]:
    """The module-level names ``problem`` asks to add (the module's rules), in order.
    Cached: the pre-grade check asks it of every candidate and draw of a task."""
    problem = problem.replace("\r\n", "\n")
    taken = _starter_names(starter)
    classes = _starter_classes(starter)
    called = _called_names(problem)
    prose = _FENCE_BLOCK.sub("\n\n", problem)
    found = [n for s in _sentences(prose) for n in _asked(s, called, classes)]
    found += _shown(problem)
    found += _listed(prose)
    names: list[str] = []
    for name in found:
        if name not in taken and name not in names:
            names.append(name)
    return tuple(names)


def _shown(problem: str) -> list[str]:
    """The functions and classes a code block defines right after a sentence that asks to
    add one ("Introduce a dataclass" and the class in a block), rule 4."""
    names: list[str] = []
    start = 0
    for block in _FENCE_BLOCK.finditer(problem):
        before = problem[start : block.start()]
        start = block.end()
        if before.rstrip().endswith((".", "!", "?")) or not _introduces(before):
            continue
        names += [
            n for d in _defined(block.group(2)) if not d.startswith("test") and (n := _plain(d))
        ]
    return names


_ITEM_SPAN: Final = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(`+)(.+?)\1")


def _listed(text: str) -> list[str]:
    """Rule 6: the names that begin the items of a list introduced by a sentence that asks
    for functions or classes and ends with ":"."""
    lines = text.split("\n")
    names: list[str] = []
    for i, line in enumerate(lines):
        if not line.rstrip().endswith(":") or not _introduces("\n".join(lines[: i + 1])):
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        while j < len(lines) and lines[j].strip():
            if (item := _ITEM_SPAN.match(lines[j])) is not None:
                name = _span_name(item.group(2))
                if name is not None and (plain := _plain(name)):
                    names.append(plain)
            elif not lines[j].startswith((" ", "\t")):
                break  # neither an item nor its continuation: the list ended
            j += 1
    return names


def _introduces(text: str) -> bool:
    """Whether ``text``'s last sentence asks for functions or classes (rules 4 and 6)."""
    sentences = _sentences(text)
    if not sentences:
        return False
    words = {w.lower() for w in _WORD.findall(_SPAN.sub(" ", sentences[-1]))}
    if not words & VERBS or not words & KINDS or words & (MEMBER_WORDS | _NOT_SHOWN):
        return False
    return not _NEGATIONS.search(sentences[-1].lower())


def _defined(code: str) -> list[str]:
    """The functions and classes ``code`` defines at its top level; for code that does not
    parse (a signature alone: ``def parse_record(line: str) -> list[str]``), those its
    unindented ``def`` and ``class`` lines name."""
    try:
        tree = ast.parse(code)
    except PARSE_ERRORS:
        return re.findall(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", code, re.M)
    return definitions(tree)


def _asked(sentence: str, called: frozenset[str], classes: frozenset[str]) -> list[str]:
    """The names ``sentence`` asks to add (rules 1 to 3, and 5), in order."""
    spans = list(_SPAN.finditer(sentence))
    prose = _SPAN.sub(" ` ", sentence)
    words = {w.lower() for w in _WORD.findall(prose)}
    if _METHOD_WORDS & words and not KINDS & words:
        return []
    verbs = (
        m
        for m in re.finditer(r"[A-Za-z]+", sentence)
        if m.group().lower() in VERBS and not _in_span(m.start(), spans)
    )
    verb = next(verbs, None)
    if verb is None or _NEGATIONS.search(sentence[: verb.start()].lower()):
        return []
    if verb.group().lower() in MOVERS:
        return _into(sentence, verb.end(), spans) if KINDS & words else []
    span = next((s for s in spans if s.start() > verb.start()), None)
    if span is None:
        return []
    between = sentence[verb.end() : span.start()].lower()
    if _NEGATIONS.search(between) or "`" in between:
        return []
    first = _named(sentence, span, called, classes)
    return [first] if first is not None else []


def _named(
    sentence: str, span: re.Match[str], called: frozenset[str], classes: frozenset[str]
) -> str | None:
    """The module-level name ``span`` (the first after the verb) asks for, or None."""
    text = span.group(2).strip()
    before = _WORD.findall(sentence[: span.start()])[-1:]
    after = _WORD.findall(sentence[span.end() :])[:1]
    near = {w.lower() for w in (*before, *after)}
    if near & MEMBER_WORDS:
        return None
    if _adds_to_class(sentence[span.end() :], classes):
        return None
    if (sig := _SIGNATURE.match(text)) is not None:
        return _plain(sig.group(1))
    if (const := _CONSTANT.match(text)) is not None:
        return _plain(const.group(1)) if "constant" in near else None
    if not _NAME.match(text):
        return None
    return _plain(text) if near & KINDS or text in called else None


def _span_name(text: str) -> str | None:
    """The name a code span holds: a signature's (``f(x) -> int``) or a bare name's."""
    text = text.strip()
    if (sig := _SIGNATURE.match(text)) is not None:
        return sig.group(1)
    return text if _NAME.match(text) else None


def _into(sentence: str, start: int, spans: list[re.Match[str]]) -> list[str]:
    """Rule 5: the names or signatures in the code spans right after "into" (outside a span,
    after the verb at ``start``): a list of them, joined by commas, "and", "or", and words
    that say what they are ("three top-level functions:")."""
    into = next(
        (
            m
            for m in re.finditer(r"\binto\b", sentence[start:])
            if not _in_span(start + m.start(), spans)
        ),
        None,
    )
    if into is None:
        return []
    names: list[str] = []
    at = start + into.end()
    for span in spans:
        if span.start() < at:
            continue
        gap = {w.lower() for w in _WORD.findall(sentence[at : span.start()])}
        if gap - _LIST_WORDS or re.search(r"[.;!?]", sentence[at : span.start()]):
            break
        name = _span_name(span.group(2))
        if name is None:
            break
        if (plain := _plain(name)) is not None:
            names.append(plain)
        at = span.end()
    return names


_LIST_WORDS: Final = KINDS | {
    "a", "an", "and", "or", "the", "new", "two", "three", "four", "five", "several", "its",
    "own", "their", "separate", "small", "smaller", "top", "level", "module", "called", "named",
    "pure",
}  # fmt: skip
"""The words that may stand between "into" and the names it lists, and between them."""


def _plain(name: str) -> str | None:
    """``name`` when it can be a module-level name the tests import."""
    if keyword.iskeyword(name) or name in _BUILTINS or name.startswith("__"):
        return None
    return name


def _in_span(index: int, spans: list[re.Match[str]]) -> bool:
    return any(s.start() <= index < s.end() for s in spans)


def _adds_to_class(rest: str, classes: frozenset[str]) -> bool:
    """Whether ``rest`` (the sentence after the span) says it goes to one of ``classes``."""
    return any(
        re.search(rf"\b(?:to|on|in|of|into)\s+(?:the\s+)?`{re.escape(c)}`", rest) for c in classes
    )


def _sentences(text: str) -> list[str]:
    """``text``'s sentences, list items and headings, code spans kept whole."""
    spans = [(m.start(), m.end()) for m in _SPAN.finditer(text)]
    cuts = [0]
    for m in _SENTENCE_END.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):
            cuts.append(m.end())
    cuts.append(len(text))
    return [text[a:b].strip() for a, b in itertools.pairwise(cuts) if text[a:b].strip()]


def _called_names(problem: str) -> frozenset[str]:
    """Names the brief calls in a code span or a code block (``name(``)."""
    code = [m.group(2) for m in _SPAN.finditer(problem)]
    code += [m.group(2) for m in _FENCE_BLOCK.finditer(problem)]
    return frozenset(n for c in code for n in re.findall(r"(?<![\w.])([A-Za-z_]\w*)\(", c))


def _starter_names(starter: str) -> frozenset[str]:
    """Every name the starter binds, at any level (its functions, classes, methods,
    attributes, assignments, imports, parameters)."""
    try:
        tree = ast.parse(starter)
    except PARSE_ERRORS:
        return frozenset(re.findall(r"[A-Za-z_]\w*", starter))
    return frozenset(names_bound(tree, attributes=True))


def _starter_classes(starter: str) -> frozenset[str]:
    try:
        tree = ast.parse(starter)
    except PARSE_ERRORS:
        return frozenset(re.findall(r"^class\s+(\w+)", starter, re.M))
    return frozenset(n.name for n in tree.body if isinstance(n, ast.ClassDef))
