"""The user's own models without writing TOML: model files and folders (swapos/models/files.py),
a profile model's ``aliases``, ``ttl`` and CORS, on the fake backend; and ``swapos serve
--models-dir`` in a subprocess with the real Gemma 3 270M, whose KV prefixes outlive it
(``--kv-dir``)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import ollama
import pytest
from serve_fakes import chat, in_process, in_thread, over_http
from serve_process import serve_process

from swapos.backends.fake_script import FakeModelScript
from swapos.errors import ProfileError
from swapos.models.bundled import bundled_model_path
from swapos.models.files import files_profile, model_name, models_in
from swapos.models.profile import ModelConfig, Profile
from swapos.serve import ServeSettings
from swapos.serve.names import ModelNames
from swapos.testing import FakeClock

SCRIPTS = {
    "a": FakeModelScript(reply="alpha", load_s=1.0, token_s=0.1, footprint_bytes=100),
    "b": FakeModelScript(reply="bravo", load_s=1.0, token_s=0.1, footprint_bytes=100),
}


def profile(**a: Any) -> Profile:
    """Models "a" (with the serving fields ``a``) and "b"."""
    return Profile(
        name="fake",
        models={
            "a": ModelConfig(path="/nonexistent/a.gguf", **a),
            "b": ModelConfig(path="/nonexistent/b.gguf"),
        },
    )


# --- names -----------------------------------------------------------------------------------

NAMES = ModelNames.of({"a", "b"}, {"a": ["coder", "qwen:1.5b"], "x": ["gone"]})


@pytest.mark.parametrize(
    ("requested", "model"),
    [
        ("a", "a"),
        ("a:latest", "a"),
        ("coder", "a"),
        ("coder:latest", "a"),
        ("qwen:1.5b", "a"),
        ("b", "b"),
        ("qwen", None),
        ("a:7b", None),
        ("gone", None),  # an alias of a model that is not served
    ],
)
def test_a_name_or_an_alias_resolves_to_its_model(requested: str, model: str | None) -> None:
    assert NAMES.resolve(requested) == model


def test_the_listed_names_are_each_model_then_its_aliases() -> None:
    assert NAMES.listed() == [("a", "a"), ("coder", "a"), ("qwen:1.5b", "a"), ("b", "b")]
    assert NAMES.known() == "a, coder (alias of a), qwen:1.5b (alias of a), b"


# --- model files -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf", "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"),
        ("big-00001-of-00003.gguf", "big"),
        ("a.b.gguf", "a.b"),
    ],
)
def test_a_model_is_named_by_its_file(file: str, name: str) -> None:
    assert model_name(Path("/m") / file) == name


def test_a_models_folder_serves_its_gguf_models(tmp_path: Path) -> None:
    for name in ("b.gguf", "a.gguf", "big-00001-of-00002.gguf", "big-00002-of-00002.gguf"):
        (tmp_path / name).write_bytes(b"")
    for name in ("mmproj-a.gguf", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.gguf").write_bytes(b"")
    files = models_in(tmp_path)
    assert [f.name for f in files] == ["a.gguf", "b.gguf", "big-00001-of-00002.gguf"]
    made = files_profile(files)
    assert sorted(made.models) == ["a", "b", "big"]
    assert made.models["a"].path == str(tmp_path / "a.gguf") and made.roles == {}
    assert made.budget == "auto"


def test_model_files_that_cannot_be_served_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"no \.gguf model in it"):
        models_in(tmp_path)
    with pytest.raises(ProfileError, match="give a folder"):
        models_in(tmp_path / "missing")
    with pytest.raises(ProfileError, match=r"not a \.gguf model file"):
        files_profile([tmp_path / "a.bin"])
    with pytest.raises(ProfileError, match="both be served as 'a'"):
        files_profile([tmp_path / "x" / "a.gguf", tmp_path / "y" / "a.gguf"])


# --- aliases, ttl, CORS on the fake backend -------------------------------------------------


async def test_aliases_resolve_on_both_apis_and_are_listed() -> None:
    clock = FakeClock()
    aliased = profile(aliases=["coder", "qwen:1.5b"])
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(SCRIPTS, budget=100, clock=clock, profile=aliased) as s,
        ):
            cards = (await s.client.get("/v1/models")).json()["data"]
            assert [c["id"] for c in cards] == ["a", "coder", "qwen:1.5b", "b"]
            assert cards[0]["swapos"]["aliases"] == ["coder", "qwen:1.5b"]
            assert cards[1]["swapos"] == {"alias_of": "a"}
            r = await s.client.post("/v1/chat/completions", json=chat("coder"))
            assert r.json()["choices"][0]["message"]["content"] == "alpha"
            assert r.json()["model"] == "a"

            def with_ollama() -> tuple[list[str], str, str]:
                with ollama.Client(host=s.base_url, timeout=30) as c:
                    listed = [m.model or "" for m in c.list().models]
                    answer = c.chat(model="qwen:1.5b", messages=[{"role": "user", "content": "x"}])
                    shown = c.show("coder:latest").modelfile or ""
                    return listed, answer.message.content or "", shown

            listed, answer, shown = await in_thread(with_ollama)
            assert listed == ["a:latest", "coder:latest", "qwen:1.5b", "b:latest"]
            assert answer == "alpha" and "FROM /nonexistent/a.gguf" in shown
            unloaded = (await s.client.post("/unload", json={"model": "coder"})).json()
            assert unloaded == {"unloaded": ["a"], "skipped": {}}
            missing = (await s.client.post("/v1/chat/completions", json=chat("nope"))).json()
            assert "coder (alias of a)" in missing["error"]["message"]


async def test_a_models_ttl_unloads_it_once_idle_that_long() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            in_process(SCRIPTS, budget=1000, clock=clock, profile=profile(ttl="30s")) as s,
            s.server.expiry.lifespan(),  # what Hypercorn runs as the app's lifespan
        ):
            for model in ("a", "b"):  # a ends at t=1.1, b at t=2.2
                r = await s.client.post("/v1/chat/completions", json=chat(model))
                assert r.status_code == 200
            await clock.sleep(20)
            assert s.system.residency().ready() == {"a", "b"}
            await s.client.post("/v1/chat/completions", json=chat("a"))  # restarts its timer
            await clock.sleep(29)
            assert s.system.residency().ready() == {"a", "b"}
            await clock.sleep(2)
            assert s.system.residency().ready() == {"b"}  # b has no ttl: the budget's


@pytest.mark.parametrize(("origin", "allowed"), [("http://ok.example", True), ("http://x", False)])
async def test_cors_headers_go_to_an_allowed_origin_only(origin: str, allowed: bool) -> None:
    clock = FakeClock()
    settings = ServeSettings(cors_origins=("http://ok.example",), api_key="k")
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            in_process(SCRIPTS, budget=100, clock=clock, settings=settings) as s,
        ):
            auth = {"authorization": "Bearer k", "origin": origin}
            r = await s.client.get("/v1/models", headers=auth)
            assert r.status_code == 200
            assert (r.headers.get("access-control-allow-origin") == origin) is allowed
            preflight = await s.client.options(
                "/v1/chat/completions",
                headers={
                    "origin": origin,
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "authorization, content-type",
                },
            )
            assert (preflight.status_code == 200) is allowed
            assert ("access-control-allow-origin" in preflight.headers) is allowed


# --- the command line, with the real Gemma 3 270M ------------------------------------------

MESSAGES = [
    {"role": "system", "content": "You answer in one short sentence."},
    {"role": "user", "content": "Name a color."},
]


@contextmanager
def serving(*args: str) -> Iterator[str]:
    """``python -m swapos.serve ARGS`` until Ctrl-C, which must end it cleanly; its base URL."""
    with serve_process(*args) as (proc, base):
        assert httpx.get(base + "/health", timeout=30).status_code == 200
        yield base
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0


def ask(base: str) -> dict[str, Any]:
    body = {"model": "gemma", "messages": MESSAGES, "max_tokens": 6, "temperature": 0}
    r = httpx.post(base + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


@pytest.mark.real_model
@pytest.mark.slow
def test_a_models_folder_served_whose_kv_prefixes_survive_a_restart(tmp_path: Path) -> None:
    models, kv = tmp_path / "models", tmp_path / "kv"
    models.mkdir()
    source = bundled_model_path("gemma3-270m-q4_k_m")
    os.link(source, models / "gemma.gguf")
    os.link(source, models / "gemma-copy.gguf")
    (models / "README.txt").write_text("not a model")
    args = ("--models-dir", str(models), "--kv-dir", str(kv), "--preload", "gemma")
    with serving(*args) as base:
        listed = [m["id"] for m in httpx.get(base + "/v1/models").json()["data"]]
        assert listed == ["gemma", "gemma-copy"]
        tags = [m["name"] for m in httpx.get(base + "/api/tags").json()["models"]]
        assert tags == ["gemma:latest", "gemma-copy:latest"]
        states = {m["model"]: m["state"] for m in httpx.get(base + "/running").json()["models"]}
        assert states == {"gemma": "ready", "gemma-copy": "absent"}  # preloaded
        first = ask(base)
        assert first["swapos"]["kv_restored_tokens"] == 0 and first["swapos"]["load_s"] == 0
        deadline = time.monotonic() + 30
        while not list(kv.rglob("*.kv")):  # written through by the KV cache
            assert time.monotonic() < deadline, "no KV state reached the disk tier"
            time.sleep(0.05)
    with serving(*args) as base:  # a new process: its RAM tier is empty
        again = ask(base)
    assert again["swapos"]["kv_restored_tokens"] > 0
    assert again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
