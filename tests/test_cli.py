"""The ``swapos`` command: its subcommands, ``swapos ps`` against a running server (fake
backend), ``swapos models`` and ``swapos pull`` on a stand-in chunk package (no download)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import anyio
import pytest
from serve_fakes import in_thread, over_http, wait_until

from swapos import cli
from swapos.backends.fake_script import FakeModelScript
from swapos.models import bundled
from swapos.testing import FakeClock

COMMANDS = ["run", "serve", "bench", "ps", "models", "pull"]


def test_swapos_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert f"    {command} " in out


def test_bare_swapos_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    assert "COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_examples(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = cli.main([command, "--help"])
    except SystemExit as exc:  # argparse's own --help
        code = int(exc.code or 0)
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: swapos {command}")
    assert "examples:" in out
    assert f"swapos {command}" in out.split("examples:")[1]


def test_run_takes_run_s_own_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["run", "--max-attempts", "0"])  # refused by swapos.run's parser
    assert info.value.code == 2
    assert "--max-attempts" in capsys.readouterr().err


def _row(out: str, model: str) -> list[str]:
    """The cells of ``model``'s row in a printed table."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] == model:
            return cells
    raise AssertionError(f"no row for {model!r} in:\n{out}")


async def test_ps_shows_a_running_servers_residency_and_queues(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()  # driven by hand until both requests are in place
    scripts = {
        "a": FakeModelScript(reply="x y", load_s=0.0, token_s=1.0, footprint_bytes=3 * 2**20),
        "b": FakeModelScript(reply="z", load_s=0.0, token_s=0.0, footprint_bytes=2**20),
    }
    with anyio.fail_after(60):
        async with over_http(scripts, budget=8 * 2**20, clock=clock) as s:
            done: list[int] = []

            async def ask(model: str) -> None:
                body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                done.append((await s.client.post("/v1/chat/completions", json=body)).status_code)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "a")
                await wait_until(lambda: s.backend.generations.get("a") == 1)
                tg.start_soon(ask, "b")  # waits: a's request is running
                await wait_until(lambda: any(q.waiting for q in s.server.scheduler.snapshot()))
                assert await in_thread(lambda: cli.main(["ps", "--url", s.base_url])) == 0
                out = capsys.readouterr().out
                # model, state, leases, MiB, waiting, running, oldest wait s, held
                assert _row(out, "a")[:6] == ["a", "ready", "1", "3", "0", "1"]
                assert _row(out, "b")[:6] == ["b", "absent", "0", "0", "1", "0"]
                assert "used 3 MiB of 8 MiB" in out
                clock.start_driver(tg)  # let both finish
                await wait_until(lambda: len(done) == 2)
                tg.cancel_scope.cancel()
            assert done == [200, 200]

            assert await in_thread(lambda: cli.main(["ps", "--url", s.base_url, "--json"])) == 0
            running = json.loads(capsys.readouterr().out)
            assert {m["model"]: m["state"] for m in running["models"]} == {
                "a": "ready",
                "b": "ready",
            }
            assert running["used_bytes"] == 4 * 2**20


def test_ps_without_a_server_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ps", "--url", "http://127.0.0.1:9"]) == 2
    assert "is `swapos serve` running?" in capsys.readouterr().err


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, bytes]:
    """A bundled model ``standin`` of two chunk packages on ``sys.path``, and an empty
    cache: the model is absent until pulled."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    parts = [b"GGUF" + b"\x01" * 3_000_000, b"\x02" * 1_500_000]
    for i, data in enumerate(parts, start=1):
        pkg = tmp_path / "site" / f"swapos_standin_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(parts)
    monkeypatch.setitem(
        bundled.CHUNKED,
        "standin",
        bundled.Chunked(
            package="swapos_standin_part",
            distribution="swapos-standin-part",
            version="1.0",
            parts=2,
            size=len(whole),
            sha256=hashlib.sha256(whole).hexdigest(),
        ),
    )
    monkeypatch.setattr(bundled, "BUNDLED_NAMES", (*bundled.BUNDLED_NAMES, "standin"))
    return "standin", whole


def _models(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert cli.main(["models", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return {m["name"]: m for m in doc["bundled"]}


def test_pull_assembles_an_absent_bundled_model_with_a_progress_bar(
    standin: tuple[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    name, whole = standin
    before = _models(capsys)[name]
    assert before["assembled"] is False
    assert before["size"] == len(whole)  # pinned, known before it is built

    assert cli.main(["pull", name]) == 0
    err = capsys.readouterr().err
    assert f"{name}.gguf" in err and "4.5/4.5 MB" in err  # the bar, at its end
    path = bundled.cache_dir() / f"{name}.gguf"
    assert path.read_bytes() == whole
    after = _models(capsys)[name]
    assert after["assembled"] is True
    assert after["sha256"] == hashlib.sha256(whole).hexdigest()

    assert cli.main(["pull", name]) == 0  # nothing to do the second time
    assert f"{name}: already assembled" in capsys.readouterr().err


def test_pull_without_the_package_says_what_to_install(
    standin: tuple[str, bytes], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = bundled.CHUNKED["standin"]
    monkeypatch.setitem(
        bundled.CHUNKED, "standin", bundled.Chunked(**{**_fields(source), "parts": 3})
    )
    assert cli.main(["pull", "standin"]) == 2
    err = capsys.readouterr().err
    assert "needs the package swapos-standin-part3==1.0" in err
    assert not (bundled.cache_dir() / "standin.gguf").exists()


def test_pull_of_an_unknown_name_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["pull", "llama3"]) == 2
    err = capsys.readouterr().err
    assert "neither a bundled model" in err and "qwen2.5-coder-0.5b-instruct-q4_k_m" in err


def test_pull_of_a_profile_means_its_bundled_models() -> None:
    assert cli.pull_names(["default", "qwen2.5-coder-0.5b-instruct-q4_k_m"]) == [
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        "qwen2.5-coder-0.5b-instruct-q4_k_m",
    ]


def _fields(chunked: bundled.Chunked) -> dict[str, object]:
    return {f: getattr(chunked, f) for f in chunked.__struct_fields__}


def test_bench_and_serve_are_their_entry_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["bench", "replay", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err  # swapos.bench's error, exit 2
    assert cli.main(["serve", "--profile", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml" in capsys.readouterr().err  # refused before serving
