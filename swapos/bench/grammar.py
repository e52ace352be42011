"""The grammar benchmark: what structured output costs on a real model.

``python -m swapos.bench grammar [--profile default] [--model large] [--rounds 3]
[--tokens 200] [--out grammar-bench.json]``

1. **Decode, constrained against free**: each case's prompt is answered greedily twice per
   round, once free and once under its grammar (the order alternating by round): a JSON
   object (``json_object``'s grammar) and an answer of a 20-property schema. Reported per
   case: tokens, decode ms per token (after the first token: the grammar's cost is per
   sampled token), whether the two answers are the same text, and the ratio of the
   medians (target: <= 1.10).
2. **Compile**: the 20-property schema to GBNF (llama-cpp-python's converter, median of
   ``--compiles``), and llama.cpp's parse of that grammar into a sampler over the model's
   vocabulary.
3. **The bound**: the slowest schema found within :class:`~swapos.structured.schema.
   SchemaLimits` among a few shapes that make the converter work hardest (many optional
   properties, many objects, long enums), and the time to refuse ones beyond them.

Timings on a busy machine are noise: the command prints the load average it ran under.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec

from swapos.backends.llama import LlamaBackend
from swapos.backends.llama.grammar import GrammarGate
from swapos.cliargs import positive_int
from swapos.data.constraint import Constraint
from swapos.data.sampling import SamplingParams
from swapos.models.bundled import resolve_profile
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatMessage, render_chat
from swapos.structured.schema import SchemaError, compile_schema
from swapos.sysinfo import host_info

FIELDS20 = [
    "city", "country", "latitude", "longitude", "temperature_c", "feels_like_c", "humidity",
    "pressure_hpa", "wind_kph", "wind_direction", "gust_kph", "visibility_km", "uv_index",
    "cloud_cover", "precipitation_mm", "sunrise", "sunset", "condition", "is_day", "updated",
]  # fmt: skip
NUMBERS = {"latitude", "longitude", "temperature_c", "feels_like_c", "humidity",
           "pressure_hpa", "wind_kph", "gust_kph", "visibility_km", "uv_index", "cloud_cover",
           "precipitation_mm"}  # fmt: skip
SCHEMA20: dict[str, Any] = {
    "type": "object",
    "properties": {
        f: {"type": "boolean"}
        if f == "is_day"
        else {"type": "number" if f in NUMBERS else "string"}
        for f in FIELDS20
    },
    "required": FIELDS20,
    "additionalProperties": False,
}
CASES = {
    "json_object": (
        "Describe today's weather in Paris as a JSON object with a few fields. "
        "Reply with the JSON only.",
        {"type": "object"},
    ),
    "schema20": (
        "Describe today's weather in Paris as a JSON object with exactly these keys, in this "
        f"order: {', '.join(FIELDS20)}. Reply with the JSON only.",
        SCHEMA20,
    ),
}


class Decode(msgspec.Struct, frozen=True, kw_only=True):
    tokens: int
    ms_per_token: float
    text: str


class CaseReport(msgspec.Struct, frozen=True, kw_only=True):
    case: str
    free: list[Decode]
    constrained: list[Decode]
    same_text: bool
    ratio: float
    """Median ms/token constrained over free."""


class Target(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    value: float
    limit: float
    met: bool


class Compiled(msgspec.Struct, frozen=True, kw_only=True):
    seconds: float
    refused: str = ""
    """Why it was refused ("" when it compiled)."""


class GrammarReport(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    run_at: str
    host: dict[str, str]
    load_average: float
    model: str
    cases: list[CaseReport]
    compile_s: float
    """The 20-property schema to GBNF, median."""
    parse_s: float
    """llama.cpp's parse of that grammar into a sampler, median."""
    worst_compile: dict[str, Compiled]
    """Each hard shape: seconds to compile it, or to refuse it beyond the bounds."""
    targets: list[Target]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default="default", help="profile TOML or builtin name (default: default)")
    add("--model", default="large", help="the profile's model to measure (default: large)")
    add("--rounds", type=positive_int, default=3, help="free/constrained pairs per case")
    add("--tokens", type=positive_int, default=200, help="max_tokens of each answer")
    add("--compiles", type=positive_int, default=20, help="timed compiles (median)")
    add("--out", type=Path, default=Path("grammar-bench.json"), help="the JSON report")


def main(args: argparse.Namespace) -> int:
    """Structured output's cost: constrained decode against free, grammar compile times."""
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    specs = model_specs(resolve_profile(args.profile))
    spec = specs[args.model]
    load = os.getloadavg()[0]
    say(f"grammar bench on {args.model} ({spec.path}), load average {load:.2f}")
    report = anyio.run(_measure, spec, args, say)
    args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report), indent=2))
    for case in report.cases:
        say(f"{case.case}: ratio x{case.ratio:.3f}, same text {case.same_text}, "
            f"{case.free[0].tokens}/{case.constrained[0].tokens} tokens")  # fmt: skip
    say(f"compile 20 properties: {report.compile_s * 1e3:.2f} ms; llama.cpp parse "
        f"{report.parse_s * 1e3:.2f} ms")  # fmt: skip
    for name, c in report.worst_compile.items():
        say(
            f"  {name}: {c.seconds * 1e3:.1f} ms"
            + (f" (refused: {c.refused})" if c.refused else "")
        )
    say(f"report: {args.out}")
    return 0 if all(t.met for t in report.targets) else 1


async def _measure(spec: ModelSpec, args: argparse.Namespace, say: Callable[[str], None]) -> Any:
    backend = LlamaBackend()
    fmt = await anyio.to_thread.run_sync(backend.chat_format, spec)
    assert fmt is not None, f"{spec.name} has no chat template"
    model = await backend.load(spec)
    cases = []
    try:
        for name, (ask, schema) in CASES.items():
            prompt = render_chat(fmt, [ChatMessage(role="user", content=ask)])
            tokens = await model.tokenize(prompt, special=True)
            constraint = Constraint(gbnf=compile_schema(schema), what=name)
            free: list[Decode] = []
            held: list[Decode] = []
            for r in range(args.rounds):
                order = [None, constraint] if r % 2 == 0 else [constraint, None]
                for c in order:
                    params = SamplingParams(max_tokens=args.tokens, constraint=c)
                    out = await model.generate(tokens, params)
                    s = out.stats
                    ms = s.gen_s / max(s.tokens - 1, 1) * 1e3
                    (free if c is None else held).append(
                        Decode(tokens=s.tokens, ms_per_token=ms, text=out.text)
                    )
                    say(f"  {name} round {r} {'free' if c is None else 'grammar'}: "
                        f"{s.tokens} tokens, {ms:.1f} ms/token")  # fmt: skip
            ratio = statistics.median(d.ms_per_token for d in held) / statistics.median(
                d.ms_per_token for d in free
            )
            same = free[0].text == held[0].text
            cases.append(CaseReport(case=name, free=free, constrained=held, same_text=same,
                                    ratio=ratio))  # fmt: skip
        compile_s = _median_time(lambda: compile_schema(SCHEMA20), args.compiles)
        gbnf = compile_schema(SCHEMA20)
        parse_s = model.with_handles(
            lambda h: _median_time(
                lambda: GrammarGate(h.vocab, h.n_vocab, Constraint(gbnf=gbnf)).close(),
                args.compiles,
            )
        )
    finally:
        await model.close()
    worst = {name: _compile_time(schema) for name, schema in _hard_shapes().items()}
    targets = [Target(name=f"decode ratio {c.case}", value=c.ratio, limit=1.10,
                      met=c.ratio <= 1.10) for c in cases]  # fmt: skip
    return GrammarReport(
        kind="grammar-bench",
        run_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        host=host_info(),
        load_average=os.getloadavg()[0],
        model=spec.name,
        cases=cases,
        compile_s=compile_s,
        parse_s=parse_s,
        worst_compile=worst,
        targets=targets,
    )


def _median_time(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _compile_time(schema: Any) -> Compiled:
    t = time.perf_counter()
    try:
        compile_schema(schema)
    except SchemaError as exc:
        return Compiled(seconds=time.perf_counter() - t, refused=str(exc)[:120])
    return Compiled(seconds=time.perf_counter() - t)


def _hard_shapes() -> dict[str, Any]:
    """Schemas that make the converter work hardest, within the bounds and past them."""

    def obj(n: int, *, required: bool, prefix: str = "p") -> dict[str, Any]:
        props = {f"{prefix}{i}": {"type": "string"} for i in range(n)}
        return {"type": "object", "properties": props, **({"required": list(props)} if
                required else {})}  # fmt: skip

    return {
        "128 optional properties": obj(128, required=False),
        "2 objects of 128 optional properties": {
            "type": "object",
            "properties": {f"o{j}": obj(128, required=False, prefix=f"o{j}p") for j in range(2)},
            "required": ["o0", "o1"],
        },
        "past the bounds: 30 objects of 128 optional properties": {
            "type": "object",
            "properties": {f"o{j}": obj(128, required=False, prefix=f"o{j}p") for j in range(30)},
        },
        "past the bounds: 900 optional properties": obj(900, required=False),
        "4000 required properties": obj(4000, required=True),
        "enum of 1024 long strings": {"enum": ["x" * 200 + str(i) for i in range(1024)]},
        "nested quantifiers": {"type": "string", "pattern": "^((a|b){0,256}c{0,256}){0,256}$"},
        "past the bounds: 1 MB": obj(40_000, required=True),
    }
