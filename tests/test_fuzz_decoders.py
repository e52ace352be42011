"""Every decoder of outside input raises only the project's own errors, whatever it is fed.

meta.json, profiles, event logs, capsules and KV files on disk are fuzzed here; model output
through the extractor in ``test_extract.py``.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swapos.bench.replay import load_events
from swapos.capsule.schema import CapsuleError, decode_capsule, encode_capsule, new_capsule
from swapos.errors import SwapOSError
from swapos.kvstore import DiskStore
from swapos.models.profile import decode_profile
from swapos.pipeline.tasks import load_task

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
META_KEYS = st.sampled_from(["task_id", "category", "difficulty", "description", "extra"])
META = st.dictionaries(META_KEYS, JSONISH, max_size=5)


def _task_dir(root: Path, meta: bytes) -> Path:
    for sub in ("starter", "tests"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "meta.json").write_bytes(meta)
    (root / "problem.md").write_text("brief")
    (root / "starter" / "solution.py").write_text("x = 1\n")
    (root / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    return root


@FUZZ
@given(st.one_of(META.map(lambda d: json.dumps(d).encode()), st.binary(max_size=200)))
def test_any_meta_json_loads_or_is_a_task_error(meta: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            task = load_task(_task_dir(Path(tmp), meta))
        except SwapOSError:
            return
        assert task.meta.task_id and 1 <= task.meta.difficulty <= 10


TOML_LINES = st.lists(
    st.sampled_from(
        [
            "[models.a]",
            'path = "a.gguf"',
            'bundled = "nope"',
            "n_ctx = -5",
            "n_ctx = 2048",
            "[roles]",
            'code = "a"',
            'code = "b"',
            'budget = "1.5GiB"',
            'budget = "lots"',
            "budget = 0",
            "[pipeline]",
            "max_attempts = 0",
            "resamples = -1",
            "[phases.code]",
            "max_tokens = 10",
            'prompt = "chat"',
            'prompt = "poem"',
            "[[models]]",
            "= =",
            'mode = "lru"',
            'mode = "fast"',
            "selfcheck = 3",
        ]
    ),
    max_size=12,
).map("\n".join)


@FUZZ
@given(st.one_of(TOML_LINES, st.text(max_size=200)))
def test_any_profile_text_decodes_or_is_a_profile_error(text: str) -> None:
    with contextlib.suppress(SwapOSError):
        decode_profile(text, source="fuzz.toml")


@FUZZ
@given(st.lists(st.one_of(JSONISH.map(json.dumps), st.text(max_size=60)), max_size=6))
def test_any_event_log_replays_or_is_an_event_log_error(lines: list[str]) -> None:
    header = json.dumps({"type": "RunStarted", "t": 0.0, "schema_version": 1})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_text("\n".join([header, *lines]) + "\n")
        with contextlib.suppress(SwapOSError):
            load_events(path)


VALID_CAPSULE = encode_capsule(new_capsule(task_id="t", category="bugfix", goal="g"))


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=200),
        JSONISH.map(lambda d: json.dumps(d).encode()),
        st.integers(0, len(VALID_CAPSULE)).map(lambda n: VALID_CAPSULE[:n]),
    )
)
def test_any_capsule_bytes_decode_or_are_a_capsule_error(data: bytes) -> None:
    with contextlib.suppress(CapsuleError):
        decode_capsule(data)


ID = "sha256=aaa;size=1;mtime_ns=2;n_ctx=2048;kv=f16/f16;llama_cpp=0.3.36"


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 64))
def test_any_kv_file_on_disk_is_a_hit_or_a_miss(garbage: bytes, keep: int) -> None:
    from swapos.data.prefix import PrefixState

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        DiskStore(root, 10_000).put(ID, PrefixState(tokens=(1, 2, 3), state=b"s" * 50))
        (path,) = sorted(root.glob("*/*.kv"))
        path.write_bytes(path.read_bytes()[:keep] + garbage)
        found = DiskStore(root, 10_000).longest_prefix(ID, [1, 2, 3, 4])
        assert found.state is None or found.state.tokens == (1, 2, 3)


@FUZZ
@given(
    st.fixed_dictionaries(
        {
            "task_id": st.sampled_from(["", "a/b", "ok", "x" * 300]),
            "category": st.sampled_from(["bugfix", "completion", "poetry"]),
            "difficulty": st.integers(-3, 14),
        }
    )
)
def test_meta_json_values_out_of_range_are_a_task_error(meta: dict[str, object]) -> None:
    valid = (
        meta["task_id"] == "ok"
        and meta["category"] != "poetry"
        and 1 <= int(meta["difficulty"]) <= 10  # type: ignore[call-overload]
    )
    with tempfile.TemporaryDirectory() as tmp:
        try:
            load_task(_task_dir(Path(tmp), json.dumps(meta).encode()))
        except SwapOSError:
            assert not valid
        else:
            assert valid
