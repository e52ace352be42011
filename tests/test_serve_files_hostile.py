"""Hostile model files given to ``swapos serve``: links out of ``--models-dir``, crafted GGUF
headers (by name and in a folder), and files that change while served.

What a user gets (docs/serve.md, "Your own models"): a link to a model elsewhere is served
under the link's name; any other entry named ``*.gguf`` that is not a readable GGUF model
stops the server before it serves, with exit code 2 and one line ``error: FILE ...; what to
do``, whether it was named on the command line or found in a folder. A served file deleted,
truncated or replaced before its model loads fails that request with the file named; the
server, ``/health`` and the other models go on.

The refusals run ``swapos.serve.cli.main`` in-process, in a thread bounded in time (a FIFO
hung the server before); the changes while served run ``python -m swapos.serve`` with the
real Gemma 3 270M, on asyncio and on trio.
"""

from __future__ import annotations

import os
import struct
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from swapos.models.bundled import bundled_model_path
from swapos.models.files import files_profile, models_in
from swapos.models.gguf import read_gguf
from swapos.models.resolve import checked_model_specs
from swapos.serve.cli import EXIT_ERROR, main
from tests.test_gguf_footprint import tiny_gguf
from tests.test_serve_own_models import serving

TEXT = b"# my model notes\nthis is not a model, just text saved as .gguf\n" * 4


def _str(n: int, text: bytes = b"general.architecture") -> bytes:
    return struct.pack("<Q", n) + text


def _head(version: int = 3, tensors: int = 0, kvs: int = 1) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, kvs)


# Each: the file's bytes, and what the one error line must say of it.
CRAFTED: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "too small to be a GGUF model (0 bytes)"),
    "text": (TEXT, "not a GGUF file (bad magic)"),
    "magic-GGML": (b"GGML" + tiny_gguf()[4:], "not a GGUF file (bad magic)"),
    "version-1": (_head(1) + b"\0" * 64, "GGUF version 1; only versions 2 and 3"),
    "version-4": (_head(4) + b"\0" * 64, "GGUF version 4; only versions 2 and 3"),
    "version-2**32-1": (_head(2**32 - 1) + b"\0" * 64, "GGUF version 4294967295"),
    "tensor-count-2**63": (_head(tensors=2**63, kvs=0) + b"\0" * 4096, "GGUF header"),
    "kv-count-2**63": (_head(kvs=2**63) + b"\0" * 4096, "GGUF header"),
    "key-length-2**40": (_head() + _str(2**40) + b"\0" * 64, "GGUF header"),
    "key-length-2**64-1": (_head() + _str(2**64 - 1) + b"\0" * 64, "GGUF header"),
    "value-length-2**40": (
        _head() + _str(20) + struct.pack("<I", 8) + _str(2**40, b"toy") + b"\0" * 64,
        "GGUF header",
    ),
    "tensor-data-missing": (tiny_gguf()[:-32], "is truncated: its tensors need"),
}


def refusal(*argv: str) -> int | None:
    """``swapos serve ARGV`` in-process, on a free port with no KV disk tier, given 30 s: its
    exit code (None when it had not returned: it hung, or it is serving)."""
    box: list[int] = []

    def run() -> None:
        box.append(main(["--port", "0", "--kv-dir", "none", *argv]))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    return box[0] if box else None


def one_error_line(capsys: pytest.CaptureFixture[str], code: int | None) -> str:
    """The refusal's one stderr line, after checking it was a refusal and no traceback."""
    err = capsys.readouterr().err
    assert code == EXIT_ERROR, f"exit {code} (None: hung or serving); stderr: {err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# --- links out of --models-dir --------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A shared store outside the models folder, holding a GGUF model and a text file."""
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "shared-Q4.gguf").write_bytes(tiny_gguf())
    (folder / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (folder / "sub").mkdir()
    return folder


@pytest.fixture
def models(tmp_path: Path, store: Path) -> Path:
    """The models folder: one model of its own, one linked from the store."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "own.gguf").write_bytes(tiny_gguf())
    (folder / "linked.gguf").symlink_to(store / "shared-Q4.gguf")
    return folder


def test_a_link_to_a_model_elsewhere_is_served_under_the_links_name(models: Path) -> None:
    made = files_profile(models_in(models))
    assert sorted(made.models) == ["linked", "own"]
    assert made.models["linked"].path == str(models / "linked.gguf")  # the link, not its target
    specs = checked_model_specs(made)
    assert read_gguf(specs["linked"].path).architecture == "toy"


def _dangling(entry: Path, store: Path) -> None:
    entry.symlink_to(store / "deleted.gguf")


def _loop(entry: Path, store: Path) -> None:
    entry.symlink_to(entry.with_name("loop-b.gguf"))
    entry.with_name("loop-b.gguf").symlink_to(entry)


def _fifo(entry: Path, store: Path) -> None:
    os.mkfifo(store / "pipe")
    entry.symlink_to(store / "pipe")


BAD_ENTRIES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "dangling-link": (_dangling, "deleted.gguf, which does not exist; fix or remove the link"),
    "link-loop": (_loop, "is a link loop; fix or remove the link"),
    "link-to-a-folder": (lambda e, s: e.symlink_to(s / "sub"), "is a folder, not a model"),
    "link-to-a-text-file": (lambda e, s: e.symlink_to(s / "passwd"), "bad magic"),
    "link-to-dev-zero": (lambda e, s: e.symlink_to("/dev/zero"), "is a device, not a model"),
    "link-to-a-fifo": (_fifo, "is a FIFO, not a model"),
    "a-fifo": (lambda e, s: os.mkfifo(e), "is a FIFO, not a model"),
    "a-folder": (lambda e, s: e.mkdir(), "is a folder, not a model"),
}


@pytest.mark.parametrize("how", ["in-a-folder", "by-name"])
@pytest.mark.parametrize("kind", sorted(BAD_ENTRIES))
def test_an_entry_that_is_not_a_model_stops_the_server_naming_it(
    kind: str, how: str, models: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, says = BAD_ENTRIES[kind]
    entry = models / "bad.gguf"
    make(entry, store)
    argv = ("--models-dir", str(models)) if how == "in-a-folder" else (str(entry),)
    line = one_error_line(capsys, refusal(*argv))
    assert f"error: {entry} " in line and says in line


# --- crafted GGUF headers ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["in-a-folder", "by-name"])
@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_a_crafted_header_stops_the_server_naming_the_file(
    name: str, how: str, models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, says = CRAFTED[name]
    bad = models / "crafted.gguf"
    bad.write_bytes(data)
    argv = ("--models-dir", str(models)) if how == "in-a-folder" else (str(bad),)
    tracemalloc.start()
    try:
        code = refusal(*argv)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = one_error_line(capsys, code)
    assert f"error: {bad} " in line and says in line
    assert "; " in line  # what is wrong; what to do
    assert peak < 64 << 20  # a 2**40-byte string is never allocated


def test_a_file_truncated_anywhere_stops_the_server_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = tiny_gguf()
    bad = tmp_path / "cut.gguf"
    for cut in range(len(whole)):  # every byte of the header, the tensor info, the data
        bad.write_bytes(whole[:cut])
        line = one_error_line(capsys, refusal(str(bad)))
        assert f"error: {bad} " in line and "re-download" in line, f"cut at {cut}: {line}"


# --- files that change while served (the real loader) ------------------------------------------


def _chat(base: str, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    return httpx.post(base + "/v1/chat/completions", json=body, timeout=120)


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_served_file_that_changes_before_it_loads_fails_only_its_requests(
    tmp_path: Path, backend: str
) -> None:
    source = bundled_model_path("gemma3-270m-q4_k_m")
    header = read_gguf(source).data_offset
    store, models = tmp_path / "store", tmp_path / "models"
    store.mkdir()
    models.mkdir()
    os.link(source, store / "gemma.gguf")
    (models / "keep.gguf").symlink_to(store / "gemma.gguf")  # a link out of the folder
    for name in ("gone", "swapped", "piped"):
        os.link(source, models / f"{name}.gguf")
    cut = models / "cut.gguf"  # the real header, sparse after it: never the bundled file
    with source.open("rb") as f:
        cut.write_bytes(f.read(header))
    os.truncate(cut, source.stat().st_size)
    with serving(
        "--models-dir", str(models), "--kv-dir", "none", "--async-backend", backend
    ) as base:
        (models / "gone.gguf").unlink()
        (tmp_path / "text").write_bytes(TEXT)
        os.replace(tmp_path / "text", models / "swapped.gguf")
        os.truncate(cut, header + 4096)
        os.mkfifo(tmp_path / "fifo")
        os.replace(tmp_path / "fifo", models / "piped.gguf")  # hung the whole server before
        for model, says in [
            ("gone", "does not exist"),
            ("swapped", "not a GGUF file (bad magic)"),
            ("cut", "is truncated: its tensors need"),
            ("piped", "is a FIFO, not a model file"),
        ]:
            r = _chat(base, model)
            assert r.status_code == 500, r.text
            message = r.json()["error"]["message"]
            assert str(models / f"{model}.gguf") in message and says in message
            assert httpx.get(base + "/health", timeout=10).status_code == 200
        assert _chat(base, "keep").status_code == 200
        os.link(source, models / "gone.gguf")  # put back: the next request loads it
        assert _chat(base, "gone").status_code == 200
