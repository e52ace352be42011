"""Parsing model outputs: code from the code phase, a plan and feedback from the others.

Small base models write messy answers: prose before the code, several fenced blocks (the
solution, then a usage example), a fence left open because ``max_tokens`` ran out, or bare code
because the prompt already opened the fence. :func:`extract_code` handles all of these and says
*how* it found the code, so the records show it; it returns empty code (``how="empty"``) when
nothing usable is there, and the caller turns that into a failure reason.
"""

from __future__ import annotations

import ast
import re
from typing import Final, Literal

import msgspec

from swapos.data.task import Task
from swapos.pipeline.bindings import definitions

How = Literal[
    "fenced",  # a complete fenced block
    "open_fence",  # a fence that never closed (the model hit its token cap)
    "before_fence",  # code closed by a fence the prompt had opened
    "bare",  # no fences: code, possibly after or before prose
    "completion",  # the prompt's function plus the generated body
    "completion_rewrite",  # the prompt's function, then a full redefinition by the model
    "empty",  # nothing usable
]

_SPECIAL: Final = re.compile(r"<(?:eos|bos|end_of_turn|start_of_turn|\|endoftext\||/s|s)>")
_FENCE: Final = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$", re.MULTILINE)
_PY_LANGS: Final = frozenset({"", "python", "py", "python3", "py3", "pycon"})
_CODE_START: Final = re.compile(
    r"^(?:(?:async\s+)?def\s+\w+\s*\(|class\s+\w+|import\s+\w|from\s+[\w.]+\s+import\b|@\w"
    r"|if\s+__name__\b|[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?::[^=]+)?=[^=]|#!|[\"']{3}"
    r"|(?:for|while|with|try|if)\b[^\n]*:\s*$)"
)
_DEF_NAME: Final = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)", re.MULTILINE)
_PLAN_MARKER: Final = re.compile(
    r"^\s*(?:(?:step\s*)?\d+\s*[.):](?=\s|$)|[-*•](?=\s)|step\s*\d*\s*:)\s*", re.I
)
PARSE_ERRORS: Final = (SyntaxError, ValueError, RecursionError, MemoryError)
"""What parsing untrusted model output may raise (deep nesting: RecursionError)."""
MAX_PLAN_STEPS: Final = 10
MAX_STEP_CHARS: Final = 200


class ExtractResult(msgspec.Struct, frozen=True, kw_only=True):
    """Extracted code and how it was found (``how="empty"`` means nothing usable)."""

    code: str
    how: How


def extract_code(output: str, *, task: Task) -> ExtractResult:
    """Extract the candidate ``solution.py`` from a code-phase output.

    For ``completion`` tasks the output is the continuation of the function prompt
    (``task.starter``): the result is the prompt plus the body, cut where the function ends
    (the first non-indented line), keeping helper functions the body calls. Otherwise the
    output is searched for fenced blocks (preferring complete ones that define the names the
    starter defines, then the last), an unterminated fence, or bare code between prose.

    Args:
        output: the model's raw output.
        task: the task (its starter and entry point name the expected functions).
    """
    text = _SPECIAL.sub("", output.replace("\r\n", "\n"))
    if task.category == "completion":
        return _extract_completion(text, task)
    code, how = _extract_file(text, expected_names(task))
    code = _drop_trailing_usage(code, task.starter)
    if not code.strip():
        return ExtractResult(code="", how="empty")
    return ExtractResult(code=code.strip("\n") + "\n", how=how)


def expected_names(task: Task) -> tuple[str, ...]:
    """Top-level functions and classes of the starter, plus the entry point."""
    try:
        tree = ast.parse(task.starter)
        names = definitions(tree)
    except PARSE_ERRORS:
        names = _DEF_NAME.findall(task.starter)
    if task.entry_point and task.entry_point not in names:
        names.append(task.entry_point)
    return tuple(names)


def _extract_file(text: str, names: tuple[str, ...]) -> tuple[str, How]:
    blocks = _fenced_blocks(text)
    if not blocks:
        return _bare_code(text), "bare"
    scored = [
        (_defines(code, names), how != "open_fence", _parses(code), _count_defs(code), i, code, how)
        for i, (code, how) in enumerate(blocks)
        if code.strip()
    ]
    if not scored:
        return "", "empty"
    *_, code, how = max(scored)
    if how == "open_fence":
        code = _parseable_prefix(code)
    return code, how


def _fenced_blocks(text: str) -> list[tuple[str, How]]:
    """Python blocks in ``text``: complete, unterminated, or closed by a prompt-opened fence."""
    fences = list(_FENCE.finditer(text))
    blocks: list[tuple[str, How]] = []
    if not fences:
        return blocks
    first = fences[0]
    before = text[: first.start()]
    if not first.group(2) and _looks_like_code(before):
        blocks.append((before, "before_fence"))
        fences = fences[1:]
    other: list[tuple[str, How]] = []
    while fences:
        opening = fences.pop(0)
        lang = opening.group(2).lower()
        closing = next((f for f in fences if _closes(opening, f)), None)
        start = opening.end() + 1
        body = text[start : closing.start()] if closing else text[start:]
        how: How = "fenced" if closing else "open_fence"
        (blocks if lang in _PY_LANGS else other).append((body, how))
        if closing is None:
            break
        fences = fences[fences.index(closing) + 1 :]
    return blocks or [b for b in other if _looks_like_code(b[0])]


def _closes(opening: re.Match[str], fence: re.Match[str]) -> bool:
    """A bare fence of the same character, at least as long, closes ``opening``."""
    mark, close = opening.group(1), fence.group(1)
    return not fence.group(2) and close[0] == mark[0] and len(close) >= len(mark)


def _bare_code(text: str) -> str:
    """The code between leading and trailing prose (or all of ``text`` if it parses)."""
    if _looks_like_code(text):
        return text
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return ""
    return _parseable_prefix("\n".join(lines[start:]))


def _parseable_prefix(code: str) -> str:
    """The longest prefix of whole lines that parses and defines something; else ``code``.

    Drops trailing prose or a statement cut off by the token cap. If no prefix that defines a
    function or class parses, the code is returned as is (the grader reports the error).
    """
    if _parses(code):
        return code
    lines = code.rstrip().split("\n")
    for end in range(len(lines) - 1, 0, -1):
        candidate = "\n".join(lines[:end])
        if _DEF_NAME.search(candidate) and _parses(candidate):
            return candidate
    return code


def _drop_trailing_usage(code: str, starter: str) -> str:
    """Drop the usage lines models append after a solution (top-level calls, asserts).

    Only trailing bare calls (``print(f(3))``, ``main()``) and ``assert`` statements go, and
    only when the starter has no top-level call of its own; a file of nothing else is kept.
    """
    try:
        body = ast.parse(code).body
        starter_body = ast.parse(starter).body
    except PARSE_ERRORS:
        return code
    if any(_is_usage(node) for node in starter_body):
        return code
    keep = len(body)
    while keep > 0 and _is_usage(body[keep - 1]):
        keep -= 1
    if keep in (0, len(body)):
        return code
    end = body[keep - 1].end_lineno or len(code)
    return "\n".join(code.split("\n")[:end])


def _is_usage(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assert) or (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    )


def _count_defs(code: str) -> int:
    return len(_DEF_NAME.findall(code))


def _defines(code: str, names: tuple[str, ...]) -> int:
    defined = set(_DEF_NAME.findall(code))
    return sum(1 for name in names if name in defined)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except PARSE_ERRORS:
        return False
    return True


def _looks_like_code(text: str) -> bool:
    """``text`` parses and is more than a bare word or string (prose rarely parses)."""
    if not text.strip() or not _parses(text):
        return False
    try:
        tree = ast.parse(text)
    except PARSE_ERRORS:
        return False
    return any(
        not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Name | ast.Constant))
        for node in tree.body
    )


def _extract_completion(text: str, task: Task) -> ExtractResult:
    prompt = task.starter
    body = _function_body(text, continues_line=not prompt.endswith("\n"))
    if not any(line.strip() and not line.strip().startswith("#") for line in body.split("\n")):
        entry = task.entry_point or (expected_names(task) or ("",))[-1]
        redefinition = _rewrite(text, entry)
        if not redefinition:
            return ExtractResult(code="", how="empty")
        code = f"{prompt.rstrip()}\n\n\n{redefinition}\n"
        return ExtractResult(
            code=code if _parses(code) else redefinition + "\n", how="completion_rewrite"
        )
    code = prompt + body
    if not _parses(code):
        lines = body.rstrip().split("\n")
        for end in range(len(lines) - 1, 0, -1):
            if _parses(prompt + "\n".join(lines[:end])):
                code = prompt + "\n".join(lines[:end])
                break
    return ExtractResult(code=code.rstrip() + "\n", how="completion")


def _rewrite(text: str, entry: str) -> str:
    """A full top-level redefinition of ``entry`` written by the model, if any."""
    if not entry or not re.search(rf"^(?:async\s+)?def\s+{re.escape(entry)}\s*\(", text, re.M):
        return ""
    code, _how = _extract_file(text, (entry,))
    if not re.search(rf"^(?:async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.M):
        return ""
    return code.strip("\n") if _parses(code) else ""


def _function_body(text: str, *, continues_line: bool) -> str:
    """The continuation up to the end of the function, plus helpers it calls."""
    lines = text.split("\n")
    end = len(lines)
    for index, line in enumerate(lines):
        if index == 0 and continues_line:
            continue
        if line.strip() and not line[0].isspace():
            end = index
            break
    body = "\n".join(lines[:end])
    helpers = _called_helpers(lines[end:], body)
    return body.rstrip() + ("\n\n\n" + helpers if helpers else "")


def _called_helpers(rest: list[str], body: str) -> str:
    """Top-level ``def`` chunks at the start of ``rest`` whose names ``body`` uses."""
    kept: list[str] = []
    used = body
    index = 0
    while index < len(rest):
        match = _DEF_NAME.match(rest[index])
        if not match or not re.search(rf"\b{re.escape(match.group(1))}\s*\(", used):
            break
        end = index + 1
        while end < len(rest) and (not rest[end].strip() or rest[end][0].isspace()):
            end += 1
        chunk = "\n".join(rest[index:end]).rstrip()
        if not _parses(chunk):
            break
        kept.append(chunk)
        used += "\n" + chunk
        index = end
    return "\n\n\n".join(kept)


def extract_plan(output: str) -> list[str]:
    """Plan steps from a reason-phase output, numbering and bullets stripped.

    Stops at a fence or a markdown heading; drops repeated steps (small models loop);
    keeps at most :data:`MAX_PLAN_STEPS` steps of at most :data:`MAX_STEP_CHARS` characters.
    """
    steps: list[str] = []
    for raw in _SPECIAL.sub("", output).splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~", "#")):
            if steps:
                break
            continue
        step = _PLAN_MARKER.sub("", line).strip()
        if not step or step in steps:
            continue
        steps.append(_cap(step, MAX_STEP_CHARS))
        if len(steps) == MAX_PLAN_STEPS:
            break
    return steps


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    return cut.rstrip() + "..."
