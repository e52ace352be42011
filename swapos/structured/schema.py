"""JSON schemas as grammars: checked against bounds, compiled by llama.cpp's converter.

:func:`compile_schema` turns a JSON schema into GBNF with llama-cpp-python's port of
llama.cpp's ``json_schema_to_grammar`` (the converter llama.cpp's own server uses), so an
answer sampled under the grammar always parses and has the schema's shape. What the
converter cannot express is not enforced (it says where: :data:`NOT_ENFORCED`).

A schema comes from a client, so it is bounded before it is compiled
(:class:`SchemaLimits`): its size, nesting, the repetition counts the converter unrolls
(``minItems``/``maxItems``, ``minLength``/``maxLength``, ``{m,n}`` in a pattern) and the
grammar it yields. Within the bounds compiling takes milliseconds (docs/serve.md gives the
measured worst case); outside them the request is refused with the part named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

import msgspec

from swapos.errors import SwapOSError

NOT_ENFORCED: Final = (
    "format (other than date, time, date-time and uuid), multipleOf, uniqueItems, "
    "exclusiveMinimum/exclusiveMaximum on numbers, patternProperties, if/then/else, not, "
    "dependencies, contains"
)
"""Keywords llama.cpp's converter does not turn into grammar: an answer always parses and
has the schema's structure, but these are not guaranteed."""


class SchemaError(SwapOSError, ValueError):
    """A JSON schema that cannot be used as a grammar (the message names the part)."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


class SchemaLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Bounds on a schema a client sends (each refusal names the one it crossed).

    Attributes:
        max_bytes: the schema's JSON text.
        max_depth: nesting of schemas within schemas.
        max_nodes: subschemas in all.
        max_repeat: any count the converter unrolls (``maxItems``, ``maxLength``, ``{m,n}``).
        max_optional: optional properties of one object.
        max_optional_work: the sum, over the schema's objects, of the square of their
            optional properties (the converter's rules for them grow with that square).
        max_enum: values in one ``enum``.
        max_pattern: characters in one ``pattern``.
        max_grammar_bytes: the compiled grammar.
    """

    max_bytes: int = 256 * 1024
    max_depth: int = 24
    max_nodes: int = 4096
    max_repeat: int = 256
    max_optional: int = 128
    max_optional_work: int = 2 * 128 * 128
    max_enum: int = 1024
    max_pattern: int = 512
    max_grammar_bytes: int = 512 * 1024


LIMITS: Final = SchemaLimits()
SPACE: Final = 'space ::= | " " | "\\n"{1,2} [ \\t]{0,20}'
"""Whitespace between JSON tokens as llama.cpp's own converter allows it (a newline and
indentation too): llama-cpp-python's port allows one space only, which would fight a
model that pretty-prints its JSON at every line."""
_PY_SPACE: Final = 'space ::= " "?'
_REPEAT_KEYS: Final = ("minItems", "maxItems", "minLength", "maxLength", "minProperties")
_QUANTIFIER: Final = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")
_SUBSCHEMA_LISTS: Final = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS: Final = ("properties", "$defs", "definitions")
_SUBSCHEMA_ONE: Final = ("items", "additionalProperties", "not")


def check_schema(schema: Any, limits: SchemaLimits = LIMITS) -> None:
    """Refuse a schema beyond ``limits`` or not shaped as a JSON schema.

    Raises:
        SchemaError: naming the part (a JSON pointer) and the bound.
    """
    if not isinstance(schema, dict | bool):
        raise SchemaError("a JSON schema must be an object", "schema")
    size = len(json.dumps(schema))
    if size > limits.max_bytes:
        raise SchemaError(f"{size} bytes is more than the {limits.max_bytes} allowed", "schema")
    _refuse_left_recursion(schema)
    work = 0
    for nodes, (pointer, depth, node) in enumerate(_walk(schema, "#", 0), start=1):
        work += _optional(node) ** 2
        if work > limits.max_optional_work:
            raise SchemaError(
                "too many optional properties in all (mark more of them required)", pointer
            )
        if nodes > limits.max_nodes:
            raise SchemaError(f"more than {limits.max_nodes} subschemas", "schema")
        if depth > limits.max_depth:
            raise SchemaError(f"nested deeper than {limits.max_depth} levels", pointer)
        _check_node(node, pointer, limits)


def _check_node(node: dict[str, Any], pointer: str, limits: SchemaLimits) -> None:
    for key in _REPEAT_KEYS:
        value = node.get(key)
        if isinstance(value, int | float) and value > limits.max_repeat:
            raise SchemaError(f"{key} {value} is more than {limits.max_repeat}", pointer)
    optional = _optional(node)
    if optional > limits.max_optional:
        raise SchemaError(
            f"{optional} optional properties; at most {limits.max_optional} (mark more "
            "of them required)",
            pointer,
        )
    enum = node.get("enum")
    if enum is not None:
        if not isinstance(enum, list) or not enum:
            raise SchemaError("enum must be a non-empty array", pointer)
        if len(enum) > limits.max_enum:
            raise SchemaError(f"enum of {len(enum)} values; at most {limits.max_enum}", pointer)
    pattern = node.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise SchemaError("pattern must be a string", pointer)
        if len(pattern) > limits.max_pattern:
            raise SchemaError(f"pattern longer than {limits.max_pattern} characters", pointer)
        for m in _QUANTIFIER.finditer(pattern):
            high = max(int(m.group(1)), int(m.group(2) or 0))
            if high > limits.max_repeat:
                raise SchemaError(
                    f"pattern repeats {high} times ({m.group(0)}); at most {limits.max_repeat}",
                    pointer,
                )
    ref = node.get("$ref")
    if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
        raise SchemaError(f"only local references (#/...) are followed, not {ref!r}", pointer)


def _refuse_left_recursion(schema: dict[str, Any] | bool) -> None:
    """Refuse a schema that refers to itself before its value has begun (``{"$ref": "#"}``,
    a definition that is a union holding a reference back to itself): its grammar would be
    left-recursive, which llama.cpp cannot sample (it refuses the grammar at load).

    Raises:
        SchemaError: naming the definition the cycle passes through.
    """
    if not isinstance(schema, dict):
        return
    starts = {"#": schema}
    for key in ("$defs", "definitions"):
        for name, node in (schema.get(key) or {}).items():
            starts[f"#/{key}/{name}"] = node
    for start in starts:
        seen: set[str] = set()
        todo = [start]
        while todo:
            at = todo.pop()
            for ref in _leading_refs(starts.get(at, _resolve(schema, at))):
                if ref == start:
                    raise SchemaError(
                        "refers to itself before its value begins (a left-recursive "
                        "grammar llama.cpp cannot sample)",
                        start,
                    )
                if ref not in seen:
                    seen.add(ref)
                    todo.append(ref)


def _leading_refs(node: Any) -> set[str]:
    """The references a value of ``node`` may begin with, before any character of its own:
    its ``$ref`` and those of its ``anyOf``/``oneOf``/``allOf`` branches."""
    if not isinstance(node, dict):
        return set()
    refs = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
    for key in ("anyOf", "oneOf", "allOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            for branch in branches:
                refs |= _leading_refs(branch)
    return refs


def _resolve(schema: dict[str, Any], ref: str) -> Any:
    """The subschema a local reference points at (None where it points at nothing)."""
    node: Any = schema
    for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else ():
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _optional(node: dict[str, Any]) -> int:
    """How many of ``node``'s properties are optional."""
    props = node.get("properties")
    if not isinstance(props, dict):
        return 0
    required = node.get("required")
    return len(set(props) - set(required if isinstance(required, list) else []))


def _walk(node: Any, pointer: str, depth: int) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Every subschema (an object) with its JSON pointer and depth."""
    if not isinstance(node, dict):
        return
    yield pointer, depth, node
    for key in _SUBSCHEMA_LISTS:
        items = node.get(key)
        if isinstance(items, list):
            for i, item in enumerate(items):
                yield from _walk(item, f"{pointer}/{key}/{i}", depth + 1)
    for key in _SUBSCHEMA_MAPS:
        items = node.get(key)
        if isinstance(items, dict):
            for name, item in items.items():
                yield from _walk(item, f"{pointer}/{key}/{name}", depth + 1)
    for key in _SUBSCHEMA_ONE:
        yield from _walk(node.get(key), f"{pointer}/{key}", depth + 1)


def compile_schema(schema: Any, limits: SchemaLimits = LIMITS) -> str:
    """The GBNF grammar (start rule ``root``) of the JSON values ``schema`` allows.

    Raises:
        SchemaError: the schema is beyond ``limits``, or the converter cannot use it (the
            message says what it reported).
    """
    return compile_rules({"root": schema}, limits)


def compile_rules(schemas: dict[str, Any], limits: SchemaLimits = LIMITS) -> str:
    """One grammar holding a rule per named schema (``{"root": ...}`` for one schema; a
    tool-call grammar names one rule per call shape and writes its own ``root``).

    Raises:
        SchemaError: as :func:`compile_schema`.
    """
    from llama_cpp import llama_grammar

    make: Any = llama_grammar.SchemaConverter  # untyped in llama-cpp-python
    converter = make(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    for name, schema in schemas.items():
        check_schema(schema, limits)
        try:
            resolved = converter.resolve_refs(_ref_wrapped(schema), name)
            converter.visit(resolved, "" if name == "root" else name)
        except RecursionError as exc:
            raise SchemaError("references recurse too deeply to compile", name) from exc
        except Exception as exc:  # the converter raises AssertionError, ValueError, KeyError
            raise SchemaError(f"cannot be compiled to a grammar ({exc})", name) from exc
    grammar: str = converter.format_grammar().replace(_PY_SPACE, SPACE, 1)
    if len(grammar) > limits.max_grammar_bytes:
        raise SchemaError(
            f"compiles to a grammar of {len(grammar)} bytes; at most {limits.max_grammar_bytes}",
            "schema",
        )
    return grammar


def _ref_wrapped(schema: Any) -> Any:
    """A copy of ``schema`` the converter can read: a ``$ref`` at the top moved into a
    one-branch ``anyOf`` (the converter does not follow the references inside ``$defs``
    when the top itself is a reference)."""
    copy = json.loads(json.dumps(schema))  # the converter rewrites references in place
    if isinstance(copy, dict) and "$ref" in copy:
        copy["anyOf"] = [{"$ref": copy.pop("$ref")}]
    return copy


def example_instance(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small value ``schema`` accepts (the fake backend's answer; not a validator).

    Objects get their required properties (all of them when ``additionalProperties`` is
    false, as OpenAI's strict mode requires), arrays ``minItems`` items, strings ``minLength``
    characters, numbers their minimum; the first ``enum`` value, ``const``, and the first
    branch of a union win.
    """
    if not isinstance(schema, dict) or depth > 32:
        return None
    root = defs if defs is not None else schema
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return example_instance(target, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return example_instance(schema[key][0], root, depth + 1)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    return _example_of(kind, schema, root, depth)


def _example_of(kind: str, schema: dict[str, Any], root: dict[str, Any], depth: int) -> Any:
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        wanted = set(schema.get("required", ()))
        if schema.get("additionalProperties") is False:
            wanted = set(props)
        return {k: example_instance(v, root, depth + 1) for k, v in props.items() if k in wanted}
    if kind == "array":
        item = schema.get("items", {})
        return [example_instance(item, root, depth + 1) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "a" * int(schema.get("minLength", 0))
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        return int(low) if kind == "integer" else low
    if kind == "boolean":
        return False
    return None
