"""``bench swap --sizes``: synthetic GGUF models, size parsing, the fits, and the bench end to
end on the fake backend (timings are its job, so nothing here asserts one)."""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.bench.swap.command import build_args
from swapos.bench.swap.sizes import SizesRig, main_sizes, run_sizes
from swapos.bench.swap.sizes_report import SizesReport
from swapos.bench.swap.sizes_stats import (
    TOUCHES,
    GiB,
    SizeSample,
    fit_line,
    fits,
    parse_sizes,
    size_label,
)
from swapos.clock import MonotonicClock
from swapos.data.sampling import SamplingParams
from swapos.models.digests import known_digest, sha256_file
from swapos.models.gguf import read_gguf
from swapos.models.spec import ModelSpec
from swapos.models.synthetic import VOCAB, plan_for_size, synthetic_model

MiB = 2**20


# --- sizes and fits -----------------------------------------------------------------------


def test_sizes_are_gib_unless_they_carry_a_unit() -> None:
    assert parse_sizes("0.25,0.5,1,2,4") == [GiB // 4, GiB // 2, GiB, 2 * GiB, 4 * GiB]
    assert parse_sizes(" 256MiB, 1GB ,256MiB,") == [256 * MiB, 10**9]
    for bad in ("", "0", "abc", "1,lots"):
        with pytest.raises(ValueError):
            parse_sizes(bad)
    assert [size_label(s) for s in parse_sizes("8MiB,0.25,2")] == ["8MiB", "0.25GiB", "2GiB"]


def test_the_swap_command_takes_sizes_and_refuses_bad_ones() -> None:
    args = build_args(["--sizes", "0.5,1", "--size-tokens", "4"])
    assert args.sizes == [GiB // 2, GiB]
    assert args.size_tokens == 4
    assert build_args([]).sizes is None  # the profile bench, as before
    with pytest.raises(SystemExit):
        build_args(["--sizes", "big"])


def test_a_line_is_fitted_exactly() -> None:
    intercept, slope, r2 = fit_line([1.0, 2.0, 4.0], [0.5 + 2 * x for x in (1.0, 2.0, 4.0)])
    assert intercept == pytest.approx(0.5)
    assert slope == pytest.approx(2.0)
    assert r2 == pytest.approx(1.0)
    assert fit_line([1.0, 2.0], [1.0, 1.0])[2] is None  # two points, no spread: no R²
    with pytest.raises(ValueError):
        fit_line([3.0, 3.0], [1.0, 2.0])


def sample(size: int, load_s: float, condition: str = "cold", touch: str = "none") -> SizeSample:
    return SizeSample(
        size_bytes=size, file_bytes=size, condition=condition, touch=touch, load_s=load_s,
        touch_s=0.0, ttft_s=load_s / 2, steady_ttft_s=0.0, close_s=0.0, prompt_tokens=16,
        peak_rss_delta_bytes=0, load_rss_delta_bytes=0,
    )  # fmt: skip


def test_the_load_fit_reports_bytes_per_second_over_the_untouched_samples() -> None:
    # 0.1 s fixed + 1 s per GiB; a touched sample far off the line is left out
    samples = [sample(s, 0.1 + s / GiB) for s in (GiB // 4, GiB, 2 * GiB, 4 * GiB)]
    samples.append(sample(GiB, 99.0, touch="decode"))
    samples.append(sample(GiB, 0.5, condition="warm"))  # one warm size: no warm fit
    (load, ttft) = fits(samples, ["cold", "warm"])
    assert (load.quantity, load.condition, load.samples) == ("load_s", "cold", 4)
    assert load.intercept_s == pytest.approx(0.1)
    assert load.bytes_per_s == pytest.approx(GiB)
    assert ttft.seconds_per_gib == pytest.approx(0.5)
    flat = fits([sample(GiB, 1.0), sample(2 * GiB, 0.5)], ["cold"])
    assert flat[0].bytes_per_s is None  # faster when bigger: no rate to report


# --- synthetic models ---------------------------------------------------------------------


def test_plans_land_just_under_their_target_size() -> None:
    for target in (8 * MiB, 100 * MiB, GiB // 4, GiB // 2, GiB, 2 * GiB, 4 * GiB):
        plan = plan_for_size(target)
        assert 0.98 * target <= plan.data_bytes() <= target, plan
        assert plan.n_layer >= 2
    assert plan_for_size(GiB, seed=1).name != plan_for_size(GiB).name
    with pytest.raises(ValueError):
        plan_for_size(MiB)


def test_a_synthetic_model_is_deterministic_reused_and_a_real_gguf(tmp_path: Path) -> None:
    one = synthetic_model(8 * MiB, directory=tmp_path / "one")
    two = synthetic_model(8 * MiB, directory=tmp_path / "two")
    assert one.read_bytes() == two.read_bytes()
    stat = one.stat()
    assert known_digest(str(one), stat.st_size, stat.st_mtime_ns) == sha256_file(one)
    assert synthetic_model(8 * MiB, directory=tmp_path / "one") == one
    assert one.stat().st_mtime_ns == stat.st_mtime_ns  # reused, not rewritten
    info = read_gguf(one)
    plan = plan_for_size(8 * MiB)
    assert (info.architecture, info.block_count, info.vocab_size) == (
        "llama",
        plan.n_layer,
        len(VOCAB),
    )
    assert info.data_offset + plan.data_bytes() == stat.st_size
    other = synthetic_model(8 * MiB, seed=1, directory=tmp_path / "one")
    assert other != one
    assert other.read_bytes() != one.read_bytes()
    assert not list((tmp_path / "one").glob(".*.tmp"))


def test_a_damaged_synthetic_model_is_written_again(tmp_path: Path) -> None:
    path = synthetic_model(8 * MiB, directory=tmp_path)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    assert synthetic_model(8 * MiB, directory=tmp_path).read_bytes() == good


@pytest.mark.real_model
@pytest.mark.anyio
async def test_llama_cpp_loads_a_synthetic_model_and_decodes(tmp_path: Path) -> None:
    from swapos.backends.llama import LlamaBackend

    path = synthetic_model(8 * MiB, directory=tmp_path)
    with anyio.fail_after(120):
        model = await LlamaBackend().load(ModelSpec(name="s", path=str(path), n_ctx=256))
        try:
            tokens = await model.tokenize("def f(x):")
            assert len(tokens) > 5  # byte fallback: about one token per byte, plus BOS
            out = await model.generate(tokens, SamplingParams(max_tokens=2))
        finally:
            await model.close()
    assert out.stats.tokens >= 1


# --- the bench on the fake backend --------------------------------------------------------

SCRIPT = FakeModelScript(load_s=0.01, token_s=0.001, reply="x y z w", footprint_bytes=100)


def fake_sizes_rig(tmp_path: Path, sizes: list[int]) -> SizesRig:
    (tmp_path / "drop_caches").touch()
    names = [f"{size_label(s)}-{k}" for s in sizes for k in "ab"]

    def make_model(size: int, seed: int) -> Path:
        path = tmp_path / f"m{size}-{seed}.gguf"
        path.write_bytes(bytes(size // 1024))  # distinct file sizes for the fits
        return path

    return SizesRig(
        new_backend=lambda: FakeBackend(MonotonicClock(), dict.fromkeys(names, SCRIPT)),
        make_model=make_model,
        drop_caches=tmp_path / "drop_caches",
    )


def sizes_args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    return build_args(
        ["--sizes", "8MiB,16MiB,32MiB", "--repeats", "1", "--rounds", "2", "--size-tokens",
         "3", "--out", str(tmp_path / "out" / "sizes.json"), *extra]
    )  # fmt: skip


@pytest.mark.anyio
async def test_the_size_bench_measures_every_size_touch_and_mode(tmp_path: Path) -> None:
    args = sizes_args(tmp_path)
    rig = fake_sizes_rig(tmp_path, args.sizes)
    with anyio.fail_after(60):
        report = await run_sizes(rig, args, say=lambda _: None)
    assert report.cold_method == "drop_caches"
    assert len(report.samples) == 1 * 2 * 3 * len(TOUCHES)
    assert {(s.condition, s.touch) for s in report.samples} == {
        (c, t) for c in ("warm", "cold") for t in TOUCHES
    }
    assert {s.touch_s for s in report.samples if s.touch == "none"} == {0.0}
    assert len(report.runs) == 2 * 2 * 3 * 2  # rounds x conditions x sizes x modes
    assert {(r.run.mode, r.run.loads, r.run.error) for r in report.runs} == {
        ("overlap", 2, None),
        ("lru", 2, None),
    }
    assert [(r.run.round, r.run.position, r.run.mode) for r in report.runs[:2]] == [
        (0, 0, "overlap"),
        (0, 1, "lru"),
    ]
    assert report.runs[12].run.mode == "lru"  # round 2 starts with the other mode
    assert {(f.quantity, f.condition) for f in report.fits} == {
        (q, c) for q in ("load_s", "ttft_s") for c in ("warm", "cold")
    }
    assert {(r.size_bytes, r.condition) for r in report.ratios} == {
        (s, c) for s in args.sizes for c in ("warm", "cold")
    }
    assert all(len(r.per_round) == 2 for r in report.ratios)
    assert len(report.sizes) == 3 * 2 * len(TOUCHES)
    assert "--sizes 8MiB,16MiB,32MiB" in report.command
    decoded = msgspec.json.decode(msgspec.json.encode(report), type=SizesReport)
    assert decoded == report


def test_the_size_command_writes_its_json_and_says_about_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = sizes_args(tmp_path, "--conditions", "warm", "--rounds", "1")
    rig = fake_sizes_rig(tmp_path, args.sizes)
    assert main_sizes(args, rig=rig) == 0
    report = msgspec.json.decode(args.out.read_bytes(), type=SizesReport)
    assert {s.condition for s in report.samples} == {"warm"}
    out = capsys.readouterr().out
    png = args.out.with_suffix(".png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "no plot: plotting needs matplotlib" in out
        assert not png.exists()
    else:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Two-model pipeline" in out
