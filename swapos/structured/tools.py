"""Tool calls in a model's own format: which format a chat template speaks, the grammar of
a call, and the calls parsed back out of an answer.

A model writes tool calls the way its chat template taught it. The template says which
way: a row of :data:`FORMATS` is chosen by the marks the template's text holds (the tag it
tells the model to wrap a call in). The rows:

========  ==============================================  ==========================
format    a call as the model writes it                   families
========  ==============================================  ==========================
hermes    ``<tool_call>\\n{"name": .., "arguments": {..}}\\n</tool_call>``  Qwen2.5, Hermes
mistral   ``[TOOL_CALLS] [{"name": .., "arguments": {..}}]``  Mistral, Mixtral
llama3    ``{"name": .., "parameters": {..}}`` (alone)      Llama 3.1-3.3
========  ==============================================  ==========================

A template that takes ``tools`` but holds none of these marks cannot have its calls
parsed, and a template that never reads ``tools`` cannot be told of them: both are
refused where tools are asked for (:func:`call_format` returns None).

Grammars (:func:`call_constraint`): ``required`` and a named function force a call from
the first token; ``auto`` leaves the text free until the model writes the format's opening
mark, and from there on the call must be one of the offered tools with arguments of its
schema (a lazy grammar, as llama.cpp's server does it). Either way a call that is parsed
has arguments that parse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from swapos.data.constraint import Constraint
from swapos.structured.schema import SchemaError, compile_rules, example_instance


class ToolFunction(msgspec.Struct, frozen=True, kw_only=True):
    """One offered function (OpenAI's ``tools[i].function``, Ollama's the same)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)
    strict: bool | None = None


class ParsedCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call read from an answer: the function's name and its arguments as JSON text."""

    name: str
    arguments: str


class CallFormat(msgspec.Struct, frozen=True, kw_only=True):
    """How one family of templates writes a tool call.

    Attributes:
        name: the row's name (:data:`FORMATS`).
        marks: text a template holds when it teaches this format.
        opening: what starts a call (the lazy grammar's trigger).
        closing: what ends a call ("" where the JSON's end does).
        arguments: the key of the arguments object.
        listed: calls are one JSON array after one opening (else one object per opening).
        doubled: the template shows a call's object in doubled braces (``{{"name": ..}}``,
            as Qwen2.5-Coder's templates do), so its models write calls that way: they are
            read with one brace taken off each end.
    """

    name: str
    marks: tuple[str, ...]
    opening: str
    closing: str
    arguments: str = "arguments"
    listed: bool = False
    doubled: bool = False


HERMES: Final = CallFormat(
    name="hermes", marks=("<tool_call>",), opening="<tool_call>\n", closing="\n</tool_call>"
)
MISTRAL: Final = CallFormat(
    name="mistral", marks=("[TOOL_CALLS]",), opening="[TOOL_CALLS]", closing="", listed=True
)
LLAMA3: Final = CallFormat(
    name="llama3",
    marks=("<|python_tag|>", '"parameters": dictionary of argument name'),
    opening='{"name": ',
    closing="",
    arguments="parameters",
)
FORMATS: Final = (HERMES, MISTRAL, LLAMA3)
"""Known call formats, tried in order."""
_TAKES_TOOLS: Final = re.compile(r"\btools\b")
_DOUBLED: Final = re.compile(r'\{\{\\?"name\\?"')


def takes_tools(template: str) -> bool:
    """The template reads a ``tools`` variable (so it can tell the model of them)."""
    return bool(_TAKES_TOOLS.search(template))


def call_format(template: str) -> CallFormat | None:
    """The format ``template`` teaches, or None when it takes no tools or its calls'
    format is none of :data:`FORMATS`."""
    if not takes_tools(template):
        return None
    fmt = next((f for f in FORMATS if any(m in template for m in f.marks)), None)
    if fmt is not None and _DOUBLED.search(template):
        fmt = msgspec.structs.replace(fmt, doubled=True)
    return fmt


# --- grammars -----------------------------------------------------------------------------


def call_constraint(
    fmt: CallFormat,
    tools: Sequence[ToolFunction],
    *,
    forced: bool,
    parallel: bool,
    answer: Any = None,
) -> Constraint | None:
    """The grammar of a call (or, with ``parallel``, of several) of one of ``tools``; None
    where there is none to give: ``auto`` in a format without an opening tag (llama3's
    call is a bare JSON answer: it is parsed, not constrained).

    Args:
        fmt: the model's call format.
        tools: the functions it may call (one, for a named ``tool_choice``).
        forced: the answer is the call(s), from its first token (``required``, a named
            function); otherwise free text until ``fmt.opening`` (``auto``).
        parallel: more than one call may follow the first.
        answer: (not ``forced``) a JSON schema the answer must follow when it is not a
            call: the answer is then calls or that JSON, from its first token.

    Raises:
        SchemaError: a tool's ``parameters`` cannot be compiled (the tool is named).
    """
    defs: dict[str, Any] = {}
    shapes = []
    for i, tool in enumerate(tools):
        defs.update(_moved_defs(tool, f"t{i}"))
        shapes.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": tool.name},
                    fmt.arguments: {"$ref": f"#/$defs/t{i}"},
                },
                "required": ["name", fmt.arguments],
                "additionalProperties": False,
            }
        )
    call = {"anyOf": shapes, "$defs": defs} if len(shapes) > 1 else {**shapes[0], "$defs": defs}
    schemas = {"call": call} if answer is None else {"call": call, "answer": answer}
    rules = compile_rules(schemas)
    bare = 'call (";" space call)*' if parallel else "call"
    triggers: tuple[str, ...] = ()
    if fmt.listed:
        body = '"[" space call ("," space call)* "]"' if parallel else '"[" space call "]"'
        root = f"{_literal(fmt.opening)} space {body}"
    elif fmt.closing:
        one = f"{_literal(fmt.opening)} call {_literal(fmt.closing)}"
        root = f'{one} ("\\n"? {one})*' if parallel else one
    else:
        root = bare
    if answer is not None and not forced:
        root = f"({root}) | {bare} | answer" if fmt.closing or fmt.listed else f"{root} | answer"
    elif not forced:  # lazy: from the opening tag, a token of the model's own vocabulary
        if not (fmt.closing or fmt.listed):
            return None
        triggers = (fmt.opening.strip(),)
    what = ", ".join(t.name for t in tools)
    return Constraint(
        gbnf=f"root ::= {root}\n{rules}",
        triggers=triggers,
        example=_example(fmt, tools[0]),
        what=f"a call of {what}",
    )


def _moved_defs(tool: ToolFunction, key: str) -> dict[str, Any]:
    """The tool's parameter schema under ``key``, with its own ``$defs`` moved beside it
    under unique names and its local references rewritten to match (the converter names
    a referenced rule by its last path part, so two tools' ``Item`` would collide)."""
    params = json.loads(json.dumps(tool.parameters or {"type": "object", "properties": {}}))
    if not isinstance(params, dict):
        raise SchemaError("parameters must be a JSON schema object", f"tool {tool.name!r}")
    own = {**params.pop("$defs", {}), **params.pop("definitions", {})}

    def rewrite(node: Any) -> Any:
        if isinstance(node, list):
            return [rewrite(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: rewrite(v) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str):
            if ref == "#":
                out["$ref"] = f"#/$defs/{key}"
            elif (m := re.fullmatch(r"#/(?:\$defs|definitions)/([^/]+)", ref)) is not None:
                out["$ref"] = f"#/$defs/{key}-{m.group(1)}"
            else:
                raise SchemaError(
                    f"only references to #/$defs/NAME are followed in tool parameters, not {ref!r}",
                    f"tool {tool.name!r}",
                )
        return out

    moved = {f"{key}-{name}": rewrite(schema) for name, schema in own.items()}
    moved[key] = rewrite(params)
    return moved


def _literal(text: str) -> str:
    return json.dumps(text)


def _example(fmt: CallFormat, tool: ToolFunction) -> str:
    call = json.dumps({"name": tool.name, fmt.arguments: example_instance(tool.parameters)})
    if fmt.listed:
        return f"{fmt.opening}[{call}]"
    return f"{fmt.opening}{call}{fmt.closing}" if fmt.closing else call


# --- parsing ------------------------------------------------------------------------------


class Parsed(msgspec.Struct, frozen=True, kw_only=True):
    """An answer split into its text and its calls.

    Attributes:
        content: the text outside the calls (stripped).
        calls: the calls, in order.
        problems: what could not be read as a call (kept in ``content`` instead): a call
            that does not parse, or names a function that was not offered.
    """

    content: str
    calls: tuple[ParsedCall, ...] = ()
    problems: tuple[str, ...] = ()


def parse_calls(fmt: CallFormat, text: str, offered: Sequence[str]) -> Parsed:
    """The calls in ``text`` (written in ``fmt``) to functions in ``offered``; anything
    that is not such a call stays text, and why is said in ``problems``. An answer that is
    nothing but calls written as bare JSON objects (``{"name": .., "arguments": ..}``, the
    way small models often skip the tags) is read as those calls."""
    if fmt.listed:
        parsed = _parse_listed(fmt, text, offered)
    elif fmt.closing:
        parsed = _parse_tagged(fmt, text, offered)
    else:
        parsed = Parsed(content=text.strip())
    if parsed.calls or parsed.problems:
        return parsed
    return _parse_bare(fmt, text, offered)


def _parse_tagged(fmt: CallFormat, text: str, offered: Sequence[str]) -> Parsed:
    content: list[str] = []
    calls: list[ParsedCall] = []
    problems: list[str] = []
    rest = text
    opening = fmt.opening.strip()
    closing = fmt.closing.strip()
    while (start := rest.find(opening)) >= 0:
        content.append(rest[:start])
        end = rest.find(closing, start + len(opening))
        inner = rest[start + len(opening) : end if end >= 0 else len(rest)]
        whole = rest[start : end + len(closing) if end >= 0 else len(rest)]
        rest = rest[end + len(closing) :] if end >= 0 else ""
        call, problem = _read_call(inner, fmt, offered)
        if call is not None and end >= 0:
            calls.append(call)
        else:
            problems.append(problem or "a call that was cut off before its closing tag")
            content.append(whole)
    content.append(rest)
    return Parsed(content="".join(content).strip(), calls=tuple(calls), problems=tuple(problems))


def _parse_listed(fmt: CallFormat, text: str, offered: Sequence[str]) -> Parsed:
    start = text.find(fmt.opening.strip())
    if start < 0:
        return Parsed(content=text.strip())
    body = text[start + len(fmt.opening.strip()) :].strip()
    try:
        items, end = json.JSONDecoder().raw_decode(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        return Parsed(content=text.strip(), problems=(f"calls that do not parse: {exc}",))
    if not isinstance(items, list):
        items = [items]
    calls, problems = [], []
    for item in items:
        call, problem = _call_of(item, fmt, offered)
        if call is None:
            problems.append(problem)
        else:
            calls.append(call)
    if problems:
        return Parsed(content=text.strip(), problems=tuple(problems))
    content = (text[:start] + body[end:]).strip()
    return Parsed(content=content, calls=tuple(calls))


def _parse_bare(fmt: CallFormat, text: str, offered: Sequence[str]) -> Parsed:
    """An answer that is nothing but JSON call objects (``;`` or whitespace between),
    alone or in one code fence."""
    stripped = _undoubled(fmt, _unfenced(text.strip().removeprefix("<|python_tag|>")))
    if not stripped.startswith("{"):
        return Parsed(content=text.strip())
    decoder, calls, problems = json.JSONDecoder(), [], []
    rest = stripped
    while rest:
        try:
            item, end = decoder.raw_decode(rest)
        except (json.JSONDecodeError, RecursionError) as exc:
            problems.append(f"a call that does not parse: {exc}")
            break
        call, problem = _call_of(item, fmt, offered)
        if call is None:
            problems.append(problem)
            break
        calls.append(call)
        rest = rest[end:].lstrip().removeprefix(";").lstrip()
    if problems or not calls:
        return Parsed(content=text.strip(), problems=tuple(problems))
    return Parsed(content="", calls=tuple(calls))


def opens_call(text: str) -> bool | None:
    """Whether an answer that begins with ``text`` is a bare call (``{"name"``, maybe after
    a ```` ```json ```` fence, the way Qwen2.5-Coder 1.5B writes one): True once it is, False
    once it cannot be, None while it may still become one."""
    s = text.lstrip()
    i = 0
    if s.startswith("`") or s == "":
        if not "```".startswith(s[:3]) or len(s) < 3:
            return None if "```".startswith(s) else False
        after = s[3:]
        if after and len(after) < 4 and "json".startswith(after):
            return None
        i = 7 if after.startswith("json") else 3
        while i < len(s) and s[i].isspace():
            i += 1
    rest = s[i:]
    if not rest:
        return None
    if rest[0] != "{":
        return False
    rest = rest[1:].removeprefix("{").lstrip()
    if rest.startswith('"name"'):
        return True
    return None if '"name"'.startswith(rest) else False


def _unfenced(text: str) -> str:
    """``text`` without a code fence around it (```` ```json ... ``` ````), if it has one."""
    match = re.fullmatch(r"```(?:json)?\s*(.*?)\s*(?:```)?", text, flags=re.DOTALL)
    return match.group(1) if match else text


def _undoubled(fmt: CallFormat, text: str) -> str:
    """``text`` with one brace off each end where ``fmt`` doubles them and it has both."""
    if fmt.doubled and text.startswith("{{") and text.endswith("}}"):
        return text[1:-1]
    return text


def _read_call(
    inner: str, fmt: CallFormat, offered: Sequence[str]
) -> tuple[ParsedCall | None, str]:
    try:
        item = json.loads(_undoubled(fmt, inner.strip()))
    except (json.JSONDecodeError, RecursionError) as exc:
        return None, f"a call that does not parse: {exc}"
    return _call_of(item, fmt, offered)


def _call_of(item: Any, fmt: CallFormat, offered: Sequence[str]) -> tuple[ParsedCall | None, str]:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return None, "a call without a function name"
    name = item["name"]
    if name not in offered:
        return None, f"a call of {name!r}, which was not offered"
    args = item.get(fmt.arguments, item.get("arguments", {}))
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except (json.JSONDecodeError, RecursionError):
            return None, f"arguments of {name!r} that do not parse"
    if not isinstance(args, dict):
        return None, f"arguments of {name!r} that are not an object"
    return ParsedCall(name=name, arguments=json.dumps(args, ensure_ascii=False)), ""
