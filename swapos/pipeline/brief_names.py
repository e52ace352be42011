"""The names a repository task's brief asks to add: what its tests will import, before any run.

An issue that asks for something new names it: "Add a `RingBuffer` class", "Please add
`parse_duration(text) -> int`", "Add a helper `format_table(rows, headers, align=None)`",
"Introduce a dataclass `Point`". A candidate that does not define it fails every test at
import (``cannot import name 'RingBuffer'``), and with no example to check it would be graded
so. :func:`asked_names` reads those names; the pre-grade check
(:func:`swapos.pipeline.defects.candidate_defect`) holds a candidate that lacks one.

A name is read from a *sentence* (of a paragraph or a list item; a heading is one too) that
says to add it: one of :data:`VERBS` as a word, not negated before it ("do not add", "instead
of", "without"), then the first code span after the verb. The span is the name alone, its
signature (``name(args)``, an optional ``-> type``) or ``NAME = value`` after "constant".
Then it must say it is a module-level thing, one of (or rule 4):

1. the span is a signature (``parse_duration(text) -> int``);
2. a kind word of :data:`KINDS` is right before or after the span ("a helper `x`",
   "a `RingBuffer` class");
3. the brief calls it elsewhere, in a code span or a code block (``SlidingWindowLimiter(limit,
   window)`` in a list under "Add a `SlidingWindowLimiter` with the same interface:");
4. (no span) a sentence with a verb and a kind word, not ended by a full stop and not about
   tests, examples or members, is followed by a code block: the functions and classes the
   block defines, tests aside ("Introduce a dataclass" and ``class Point:`` in a block).

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
import itertools
import keyword
import re
from typing import Final

from swapos.pipeline.bindings import names_bound
from swapos.pipeline.extract import PARSE_ERRORS

VERBS: Final = frozenset(
    {"add", "adds", "adding", "implement", "implementing", "write", "create", "introduce",
     "provide", "expose", "export", "define"}
)  # fmt: skip
"""The words that ask for something new."""
KINDS: Final = frozenset(
    {"function", "class", "helper", "decorator", "exception", "constant", "dataclass",
     "enum", "coroutine", "generator", "type"}
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
_SENTENCE_END: Final = re.compile(r"(?<=[.!?:;])\s+(?=\S)|\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)]|#)\s)")
_WORD: Final = re.compile(r"[A-Za-z']+")
_BUILTINS: Final = frozenset(dir(builtins))


def asked_names(problem: str, starter: str) -> tuple[str, ...]:
    """The module-level names ``problem`` asks to add (the module's rules), in order."""
    problem = problem.replace("\r\n", "\n")
    taken = _starter_names(starter)
    classes = _starter_classes(starter)
    called = _called_names(problem)
    found = [_asked(s, called, classes) for s in _sentences(_FENCE_BLOCK.sub("\n\n", problem))]
    found += _shown(problem)
    names: list[str] = []
    for name in found:
        if name is not None and name not in taken and name not in names:
            names.append(name)
    return tuple(names)


def _shown(problem: str) -> list[str]:
    """The functions and classes a code block defines right after a sentence that asks to
    add one ("Introduce a dataclass" and the class in a block), rule 4."""
    names: list[str] = []
    start = 0
    for block in _FENCE_BLOCK.finditer(problem):
        before = _sentences(problem[start : block.start()])
        start = block.end()
        if not before or problem[: block.start()].rstrip().endswith((".", "!", "?")):
            continue
        words = {w.lower() for w in _WORD.findall(_SPAN.sub(" ", before[-1]))}
        if not words & VERBS or not words & KINDS or words & (MEMBER_WORDS | _NOT_SHOWN):
            continue
        if _NEGATIONS.search(before[-1].lower()):
            continue
        try:
            tree = ast.parse(block.group(2))
        except PARSE_ERRORS:
            continue
        defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        names += [
            n
            for node in tree.body
            if isinstance(node, defs)
            and not node.name.startswith("test")
            and (n := _plain(node.name))
        ]
    return names


def _asked(sentence: str, called: frozenset[str], classes: frozenset[str]) -> str | None:
    """The name ``sentence`` asks to add, or None."""
    spans = list(_SPAN.finditer(sentence))
    prose = _SPAN.sub(" ` ", sentence)
    words = [w.lower() for w in _WORD.findall(prose)]
    if _METHOD_WORDS & set(words) and not KINDS & set(words):
        return None
    verbs = (
        m
        for m in re.finditer(r"[A-Za-z]+", sentence)
        if m.group().lower() in VERBS and not _in_span(m.start(), spans)
    )
    verb = next(verbs, None)
    if verb is None:
        return None
    span = next((s for s in spans if s.start() > verb.start()), None)
    if span is None or _NEGATIONS.search(sentence[: verb.start()].lower()):
        return None
    between = sentence[verb.end() : span.start()].lower()
    if _NEGATIONS.search(between) or "`" in between:
        return None
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
