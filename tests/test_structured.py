"""Structured output without a model: schemas bounded and compiled, call formats read from
templates, calls parsed from answers, and a streamed answer split into text and calls."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import msgspec
import pytest

from swapos.structured.schema import (
    LIMITS,
    SPACE,
    SchemaError,
    check_schema,
    compile_schema,
    example_instance,
)
from swapos.structured.stream import CallStream
from swapos.structured.tools import (
    HERMES,
    LLAMA3,
    MISTRAL,
    ToolFunction,
    call_constraint,
    call_format,
    opens_call,
    parse_calls,
)

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    ToolFunction(name="get_temperature", parameters=CITY),
    ToolFunction(
        name="convert",
        parameters={"type": "object", "properties": {"celsius": {"type": "number"}}},
    ),
]
OFFERED = [t.name for t in TOOLS]

# --- schemas ------------------------------------------------------------------------------


def test_a_schema_compiles_to_a_grammar_with_llama_cpps_whitespace() -> None:
    grammar = compile_schema(CITY)
    assert grammar.startswith("char ::=") or "root ::=" in grammar
    assert SPACE in grammar and 'space ::= " "?' not in grammar
    assert '"\\"city\\""' in grammar


@pytest.mark.parametrize(
    ("schema", "where", "says"),
    [
        ({"type": "array", "maxItems": 100_000}, "#", "maxItems 100000 is more than"),
        ({"type": "string", "pattern": "^a{5000}$"}, "#", "pattern repeats 5000 times"),
        ({"type": "string", "pattern": "x" * 600}, "#", "pattern longer than"),
        ({"enum": list(range(5000))}, "#", "enum of 5000 values"),
        ({"$ref": "https://example.com/s.json"}, "#", "only local references"),
        ({"properties": {"a": {"$ref": "http://x/y"}}}, "#/properties/a", "only local"),
        ("not a schema", "schema", "must be an object"),
    ],
)
def test_a_schema_beyond_the_bounds_is_refused_naming_the_part(
    schema: Any, where: str, says: str
) -> None:
    with pytest.raises(SchemaError) as err:
        check_schema(schema)
    assert err.value.where == where
    assert says in str(err.value)


def test_deep_nesting_and_huge_schemas_are_refused_before_compiling() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(LIMITS.max_depth + 2):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(SchemaError, match="nested deeper than"):
        compile_schema(deep)
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(20_000)}}
    with pytest.raises(SchemaError, match="bytes is more than"):
        compile_schema(big)


def test_a_recursive_reference_compiles_to_a_recursive_rule() -> None:
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    grammar = compile_schema(tree)
    assert "node ::=" in grammar


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}},
        {"$defs": {"n": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "string"}]}}},
        {
            "$defs": {
                "a": {"allOf": [{"$ref": "#/$defs/b"}]},
                "b": {"oneOf": [{"$ref": "#/$defs/a"}]},
            }
        },
    ],
)
def test_a_schema_that_refers_to_itself_before_its_value_begins_is_refused(schema: Any) -> None:
    with pytest.raises(SchemaError, match="refers to itself before its value begins"):
        compile_schema(schema)


def test_a_schema_the_converter_cannot_use_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="cannot be compiled"):
        compile_schema({"$ref": "#/$defs/missing"})


def test_the_example_of_a_schema_validates_against_it() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1},
            "n": {"type": "integer", "minimum": 3},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "tags", "n"],
        "additionalProperties": False,
    }
    value = example_instance(schema)
    jsonschema.validate(value, schema)
    assert value == {"name": "aa", "tags": ["a"], "n": 3, "ok": False}


# --- call formats ---------------------------------------------------------------------------


def test_the_format_is_read_from_the_templates_marks() -> None:
    assert call_format("{% for t in tools %}{{ t }}{% endfor %}<tool_call>") == HERMES
    assert call_format("{% if tools %}[AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]") == MISTRAL
    assert call_format("{% if tools %}<|python_tag|>{% endif %}") == LLAMA3
    assert call_format("{{ messages }}<tool_call>") is None  # never reads tools
    assert call_format("{% if tools %}{{ tools }}{% endif %}") is None  # no known format
    doubled = call_format('{% if tools %}<tool_call>\\n{{\\"name\\": <f>}}{% endif %}')
    assert doubled is not None and doubled.doubled


def test_hermes_calls_are_parsed_and_the_text_around_them_kept() -> None:
    text = (
        "Let me look.\n<tool_call>\n"
        '{"name": "get_temperature", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "convert", "arguments": {"celsius": 21}}\n</tool_call>'
    )
    parsed = parse_calls(HERMES, text, OFFERED)
    assert parsed.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [
        ("get_temperature", {"city": "Paris"}),
        ("convert", {"celsius": 21}),
    ]
    assert parsed.problems == ()


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_temperature", "arguments": {"city": "Paris"}}',
        '```json\n{\n  "name": "get_temperature",\n  "arguments": {"city": "Paris"}\n}\n```',
    ],
)
def test_a_bare_or_fenced_call_is_read_as_a_call(text: str) -> None:
    parsed = parse_calls(HERMES, text, OFFERED)
    assert [c.name for c in parsed.calls] == ["get_temperature"]
    assert parsed.content == ""


def test_doubled_braces_are_read_only_where_the_template_teaches_them() -> None:
    text = '{{"name": "convert", "arguments": {"celsius": 21}}}'
    assert parse_calls(HERMES, text, OFFERED).calls == ()
    doubled = parse_calls(msgspec.structs.replace(HERMES, doubled=True), text, OFFERED)
    assert [(c.name, json.loads(c.arguments)) for c in doubled.calls] == [
        ("convert", {"celsius": 21})
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('<tool_call>\n{"name": "get_temperature", "arguments": {"city": \n</tool_call>',
         "does not parse"),
        ('<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>', "not offered"),
        ('<tool_call>\n{"name": "convert", "arguments": {"celsius": 2', "does not parse"),
        ('<tool_call>\n{"name": "convert", "arguments": {}}', "cut off"),
        ('<tool_call>\n{"arguments": {}}\n</tool_call>', "without a function name"),
        ('<tool_call>\n{"name": "convert", "arguments": [1]}\n</tool_call>', "not an object"),
        ("<tool_call>\n" + "[" * 100_000 + "\n</tool_call>", "does not parse"),
    ],
)  # fmt: skip
def test_what_is_not_a_call_stays_text_and_says_why(text: str, problem: str) -> None:
    parsed = parse_calls(HERMES, text, OFFERED)
    assert parsed.calls == ()
    assert parsed.content == text.strip()
    assert any(problem in p for p in parsed.problems), parsed.problems


def test_huge_arguments_are_read_whole() -> None:
    big = "x" * 2_000_000
    call = json.dumps({"name": "get_temperature", "arguments": {"city": big}})
    text = f"<tool_call>\n{call}\n</tool_call>"
    (call,) = parse_calls(HERMES, text, OFFERED).calls
    assert json.loads(call.arguments)["city"] == big


def test_mistral_and_llama3_calls_are_parsed() -> None:
    mistral = '[TOOL_CALLS] [{"name": "convert", "arguments": {"celsius": 1}}]'
    assert [c.name for c in parse_calls(MISTRAL, mistral, OFFERED).calls] == ["convert"]
    llama = (
        '{"name": "convert", "parameters": {"celsius": 1}}; {"name": "convert", "parameters": {}}'
    )
    calls = parse_calls(LLAMA3, llama, OFFERED).calls
    assert [json.loads(c.arguments) for c in calls] == [{"celsius": 1}, {}]


# --- call grammars --------------------------------------------------------------------------


def test_a_forced_call_grammar_holds_from_the_first_token_and_names_only_the_chosen() -> None:
    c = call_constraint(HERMES, TOOLS[1:], forced=True, parallel=False)
    assert c is not None and not c.lazy
    assert c.gbnf.startswith('root ::= "<tool_call>\\n" call "\\n</tool_call>"')
    assert "get_temperature" not in c.gbnf
    assert json.loads(c.example.split("\n")[1]) == {"name": "convert", "arguments": {}}


def test_an_auto_call_grammar_waits_for_the_opening_tag_token() -> None:
    c = call_constraint(HERMES, TOOLS, forced=False, parallel=True)
    assert c is not None and c.triggers == ("<tool_call>",)
    assert call_constraint(LLAMA3, TOOLS, forced=False, parallel=False) is None


def test_two_tools_with_the_same_def_names_get_rules_of_their_own() -> None:
    def tool(name: str, kind: str) -> ToolFunction:
        return ToolFunction(
            name=name,
            parameters={
                "$defs": {"Item": {"type": "object", "properties": {"v": {"type": kind}}}},
                "type": "object",
                "properties": {"item": {"$ref": "#/$defs/Item"}},
            },
        )

    c = call_constraint(HERMES, [tool("a", "string"), tool("b", "integer")], forced=True,
                        parallel=False)  # fmt: skip
    assert c is not None
    assert 't0-Item-v-kv ::= "\\"v\\"" space ":" space string' in c.gbnf
    assert 't1-Item-v-kv ::= "\\"v\\"" space ":" space integer' in c.gbnf


def test_an_answer_schema_beside_tools_makes_the_answer_a_call_or_that_json() -> None:
    c = call_constraint(HERMES, TOOLS, forced=False, parallel=False, answer=CITY)
    assert c is not None and not c.lazy
    assert "| answer" in c.gbnf.splitlines()[0]


# --- streaming ------------------------------------------------------------------------------


def _stream(pieces: list[str]) -> tuple[str, str, list[str]]:
    split = CallStream(HERMES, OFFERED)
    sent = "".join(split.add(p) for p in pieces)
    rest, parsed = split.finish()
    return sent, rest, [c.name for c in parsed.calls]


def test_text_streams_until_a_call_starts_and_the_call_comes_whole() -> None:
    pieces = ["Sure", ", checking", ". <tool", "_call>\n", '{"name": "convert", ',
              '"arguments": {}}', "\n</tool_call>"]  # fmt: skip
    sent, rest, calls = _stream(pieces)
    assert sent == "Sure, checking. "
    assert rest == ""
    assert calls == ["convert"]


def test_a_bare_call_is_held_from_the_start_and_plain_text_is_not() -> None:
    assert _stream(["```", "json\n{", '"name": "convert", "arguments": {}}', "\n```"]) == (
        "",
        "",
        ["convert"],
    )
    assert _stream(["```", "python\nx = 1\n```"]) == ("```python\nx = 1\n```", "", [])


def test_a_call_that_is_not_one_comes_out_as_text_at_the_end() -> None:
    sent, rest, calls = _stream(["Hi ", "<tool_call>\n{not json}\n</tool_call>"])
    assert (sent, calls) == ("Hi ", [])
    assert rest == "<tool_call>\n{not json}\n</tool_call>"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [("", None), ("``", None), ("```json\n", None), ("```json\n{\n  \"na", None),
     ('{"name"', True), ('```json\n{"name"', True), ("```python", False), ("Hello", False),
     ('{"a"', False), ('{{"name"', True)],
)  # fmt: skip
def test_opens_call_tells_a_bare_call_from_text_as_early_as_it_can(
    text: str, verdict: bool | None
) -> None:
    assert opens_call(text) is verdict


def test_optional_properties_are_bounded_per_object_and_in_all() -> None:
    def obj(n: int, prefix: str = "p") -> dict[str, Any]:
        return {"type": "object", "properties": {f"{prefix}{i}": {} for i in range(n)}}

    with pytest.raises(SchemaError, match="129 optional properties"):
        check_schema(obj(129))
    check_schema(obj(128))
    many = {"type": "object", "properties": {f"o{j}": obj(128, f"o{j}") for j in range(3)}}
    with pytest.raises(SchemaError, match="too many optional properties in all"):
        check_schema(many)
    required = {**obj(2000), "required": [f"p{i}" for i in range(2000)]}
    check_schema(required)


def test_the_grammar_benchmarks_hard_shapes_compile_within_the_bounds_and_not_past_them() -> None:
    from swapos.bench.grammar import _compile_time, _hard_shapes

    for name, schema in _hard_shapes().items():
        refused = _compile_time(schema).refused
        assert bool(refused) == name.startswith("past the bounds"), (name, refused)
