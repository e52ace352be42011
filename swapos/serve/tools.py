"""Tools and structured output on the served routes: from a request's ``tools``,
``tool_choice`` and ``response_format`` to what the template is given, the grammar the
answer is sampled under, and the calls read back out of it.

The functions are rendered by the model's own chat template (its ``tools`` variable) and
its calls are read in the format that template teaches (:mod:`swapos.structured.tools`).
``tool_choice``: ``none`` renders no tools (the model is not told of them); ``auto`` lets
the model answer or call (a call, once started, is held to the offered functions and their
schemas by a lazy grammar); ``required`` and a named function make the answer a call from
its first token. ``response_format`` (``json_object``, ``json_schema``) makes the answer
JSON of the schema. A model whose template cannot express tools is refused with a 400.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from swapos.data.constraint import Constraint
from swapos.models.templates import ChatFormat, TemplateToolCall
from swapos.serve.errors import RequestError
from swapos.serve.schemas import (
    ChatCompletionRequest,
    ResponseFormat,
    Tool,
    ToolCall,
    ToolChoice,
)
from swapos.structured.schema import SchemaError, compile_schema, example_instance
from swapos.structured.tools import (
    CallFormat,
    Parsed,
    ToolFunction,
    call_constraint,
    call_format,
    parse_calls,
)

JSON_OBJECT = {"type": "object"}
"""``json_object``: any JSON object (the grammar of llama.cpp's server for it)."""


@dataclass(frozen=True)
class ToolPlan:
    """How one request's tools are offered and read back.

    Attributes:
        fmt: the model's call format.
        offered: the functions the answer may call.
        template_tools: the tools as the chat template is given them (OpenAI's shape).
        constraint: the grammar of the calls (lazy for ``auto``; None: ``auto`` in a format
            whose calls have no opening tag, read from the answer unconstrained).
    """

    fmt: CallFormat
    offered: tuple[str, ...]
    template_tools: tuple[dict[str, Any], ...]
    constraint: Constraint | None

    def parse(self, text: str) -> Parsed:
        """The answer's text and calls."""
        return parse_calls(self.fmt, text, self.offered)


def plan_tools(
    model: str,
    chat: ChatFormat | None,
    tools: Sequence[Tool] | None,
    choice: ToolChoice | None,
    *,
    parallel: bool,
    answer: Any = None,
) -> ToolPlan | None:
    """The plan for a request's tools; None when there are none to offer (no ``tools``, or
    ``tool_choice: "none"``).

    Args:
        model: the model's name (for errors).
        chat: its chat format.
        tools: the request's tools.
        choice: its ``tool_choice``.
        parallel: more than one call may be made.
        answer: the schema of the final answer (``response_format``), if one is asked for:
            the answer is then either calls or JSON of that schema, from the first token.

    Raises:
        RequestError: the model's template cannot express tools, a tool is not a function,
            a named ``tool_choice`` names none of them, ``required`` without tools, or a
            tool's ``parameters`` cannot be compiled (each a 400 naming the field).
    """
    if not tools:
        if choice not in (None, "none", "auto"):
            raise RequestError(400, "tool_choice needs tools to choose from", "tool_choice")
        return None
    if choice == "none":
        return None
    for i, tool in enumerate(tools):
        if tool.type != "function":
            raise RequestError(
                400, f"tools[{i}].type {tool.type!r}: only 'function' tools", f"tools[{i}].type"
            )
    fmt = call_format(chat.template) if chat is not None and not chat.messages else None
    if fmt is None:
        raise RequestError(
            400,
            f"{model!r} cannot take tools: its chat template does not render them in a "
            "call format SwapOS reads (hermes, mistral or llama3; docs/serve.md)",
            "tools",
        )
    functions = [_function(t) for t in tools]
    chosen = functions
    if choice is not None and not isinstance(choice, str):
        chosen = [f for f in functions if f.name == choice.function.name]
        if not chosen:
            raise RequestError(
                400,
                f"tool_choice names {choice.function.name!r}, which is not among the tools",
                "tool_choice",
            )
    forced = choice == "required" or not isinstance(choice, str | None)
    try:
        constraint = call_constraint(
            fmt, chosen, forced=forced, parallel=parallel, answer=None if forced else answer
        )
    except SchemaError as exc:
        raise RequestError(400, f"tools: {exc}", "tools") from exc
    return ToolPlan(
        fmt=fmt,
        offered=tuple(f.name for f in chosen),
        template_tools=tuple(_template_tool(t) for t in tools),
        constraint=constraint,
    )


def grammar_of(
    body: ChatCompletionRequest, chat: ChatFormat | None
) -> tuple[ToolPlan | None, Constraint | None]:
    """A chat request's tool plan and the grammar its answer is sampled under (the plan's,
    or its ``response_format``'s). Blocking: compiling a schema takes up to ~0.1 s within
    :class:`~swapos.structured.schema.SchemaLimits` (``bench grammar``).

    Raises:
        RequestError: as :func:`plan_tools` and :func:`response_schema` (a 400).
    """
    answer = response_schema(body.response_format)
    plan = plan_tools(
        body.model, chat, body.tools, body.tool_choice,
        parallel=body.parallel_tool_calls, answer=answer[0] if answer else None,
    )  # fmt: skip
    if plan is not None:
        return plan, plan.constraint
    if answer is None:
        return None, None
    return None, schema_constraint(*answer, param="response_format")


def _function(tool: Tool) -> ToolFunction:
    f = tool.function
    return ToolFunction(
        name=f.name,
        description=f.description or "",
        parameters=f.parameters or {"type": "object", "properties": {}},
        strict=f.strict,
    )


def _template_tool(tool: Tool) -> dict[str, Any]:
    f = tool.function
    function: dict[str, Any] = {"name": f.name}
    if f.description:
        function["description"] = f.description
    function["parameters"] = f.parameters or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def response_schema(fmt: ResponseFormat | None) -> tuple[Any, str] | None:
    """The schema a ``response_format`` asks the answer to follow, and what to call it
    (None for ``text`` or none).

    ``json_schema`` is enforced whether or not ``strict`` is set (a schema that the
    grammar can hold is held; docs/serve.md says which keywords are not).

    Raises:
        RequestError: an unknown type, ``json_schema`` without a schema, or a schema that
            cannot be compiled (a 400 naming the part).
    """
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        schema: Any = JSON_OBJECT
        what = "a JSON object"
    elif fmt.type == "json_schema":
        if fmt.json_schema is None or fmt.json_schema.schema is None:
            raise RequestError(
                400, "response_format json_schema needs json_schema.schema", "response_format"
            )
        schema, what = fmt.json_schema.schema, f"json_schema {fmt.json_schema.name!r}"
    else:
        raise RequestError(
            400,
            f"response_format.type {fmt.type!r}: use text, json_object or json_schema",
            "response_format",
        )
    return schema, what


def schema_constraint(schema: Any, what: str, *, param: str) -> Constraint:
    """The grammar of JSON values of ``schema``.

    Raises:
        RequestError: the schema cannot be compiled (a 400 naming ``param`` and the part).
    """
    try:
        gbnf = compile_schema(schema)
    except SchemaError as exc:
        raise RequestError(400, f"{param}: {exc}", param) from exc
    example = json.dumps(example_instance(schema))
    return Constraint(gbnf=gbnf, example=example, what=what)


def template_calls(calls: Sequence[ToolCall] | None) -> tuple[TemplateToolCall, ...]:
    """An assistant turn's calls as its chat template reads them (arguments decoded)."""
    out = []
    for call in calls or ():
        try:
            arguments: Any = json.loads(call.function.arguments)
        except json.JSONDecodeError:
            arguments = call.function.arguments
        out.append(TemplateToolCall(name=call.function.name, arguments=arguments, id=call.id))
    return tuple(out)
