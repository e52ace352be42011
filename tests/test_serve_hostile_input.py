"""Hostile input to ``swapos serve`` (issue 28): every answer is an OpenAI-shaped error with
the right status, never a 500 or plain text; the server keeps serving after each.

Over real HTTP (Hypercorn on the test's event loop, asyncio and trio), on the fake backend.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from fakes import fake_system
from serve_fakes import Served, chat, over_http
from structlog.testing import capture_logs

from swapos.backends.fake_script import FakeModelScript
from swapos.serve import ServeSettings, app
from swapos.testing import FakeClock

SCRIPTS = {"a": FakeModelScript(reply="alpha beta gamma", load_s=1.0, token_s=0.1)}
JSON = {"content-type": "application/json"}


def served(clock: FakeClock, settings: ServeSettings | None = None) -> Any:
    return over_http(SCRIPTS, budget=100, clock=clock, settings=settings)


def openai_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json"), r.text
    body = r.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    return dict(body)


async def still_serving(s: Served, **headers: str) -> None:
    r = await s.client.post("/v1/chat/completions", json=chat("a"), headers=headers)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    "token",
    ["Bearer sékret".encode(), "Bearer s\xe9kret".encode("latin-1"), b"Bearer \xff\xfe", b"\xc3"],
    ids=["utf8", "latin1", "raw-bytes", "no-scheme"],
)
async def test_a_non_ascii_bearer_token_is_a_401(token: bytes) -> None:
    clock = FakeClock()
    settings = ServeSettings(api_key="sekret")
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(SCRIPTS, budget=100, clock=clock, settings=settings) as s,
        ):
            r = await s.client.post(
                "/v1/chat/completions", json=chat("a"), headers={"authorization": token}
            )
            assert openai_error(r, 401)["code"] == "invalid_api_key"
            r = await s.client.get("/v1/models", headers={"authorization": token})
            openai_error(r, 401)
            await still_serving(s, authorization="Bearer sekret")


def _deep(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


DEEP_BODIES = {
    "unknown-field": lambda: '{"model": "a", "messages": [], "extra": ' + _deep(100_000) + "}",
    "messages": lambda: '{"model": "a", "messages": ' + _deep(100_000) + "}",
    "stop": lambda: (
        '{"model": "a", "messages": [{"role": "user", "content": "hi"}], "stop": '
        + _deep(50_000)
        + "}"
    ),
    "objects": lambda: '{"model": "a", "x": ' + '{"k": ' * 50_000 + "1" + "}" * 50_000 + "}",
    "top-level": lambda: _deep(200_000),
}


@pytest.mark.parametrize("shape", sorted(DEEP_BODIES))
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/unload"])
async def test_deeply_nested_json_is_a_400_in_the_openai_shape(shape: str, path: str) -> None:
    clock = FakeClock()
    body = DEEP_BODIES[shape]().encode()
    settings = ServeSettings(max_body_bytes=len(body) + 1)
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(SCRIPTS, budget=100, clock=clock, settings=settings) as s,
        ):
            r = await s.client.post(
                path, content=body, headers={"content-type": "application/json"}
            )
            assert openai_error(r, 400)["type"] == "invalid_request_error"
            await still_serving(s)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seed", -1),
        ("seed", -(2**63)),
        ("seed", 2**63),
        ("temperature", -0.5),
        ("temperature", 1e400),
        ("top_p", 1.5),
        ("top_p", -0.1),
    ],
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
async def test_out_of_range_sampling_values_are_a_400_naming_the_field(
    field: str, value: float, path: str
) -> None:
    clock = FakeClock()
    body = chat("a") if path.endswith("chat/completions") else {"model": "a", "prompt": "hi"}
    raw = httpx.Request("POST", "http://x", json=body).content.decode()
    raw = raw[:-1] + f', "{field}": {value!r}'.replace("inf", "1e400") + "}"
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:
            r = await s.client.post(path, content=raw, headers=JSON)
            err = openai_error(r, 400)
            assert field in err["message"] and err["type"] == "invalid_request_error"
            assert err["param"] in (field, None) and "n_batch" not in err["message"]
            await still_serving(s)


async def test_a_bug_in_a_handler_is_a_500_in_the_openai_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    app_module = sys.modules["swapos.serve.app"]  # the package exports a function of that name

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(app_module, "prepare_chat", broken)
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:
            r = await s.client.post("/v1/chat/completions", json=chat("a"))
            err = openai_error(r, 500)
            assert err["type"] == "server_error" and "RuntimeError" in err["message"]


async def test_stop_reason_is_one_docs_serve_lists() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:
            capped = await s.client.post("/v1/chat/completions", json=chat("a", max_tokens=1))
            whole = await s.client.post("/v1/chat/completions", json=chat("a"))
    assert capped.json()["choices"][0]["finish_reason"] == "length"
    assert capped.json()["swapos"]["stop_reason"] == "length"
    assert whole.json()["swapos"]["stop_reason"] in ("eos", "stop", "length", "context")


async def test_a_client_gone_while_sending_its_body_is_no_internal_error() -> None:
    """The body never comes (``http.disconnect``): no ``serve.request_failed`` traceback, no
    500, the server answers the next client (a soak under load logged one per hang-up)."""
    clock, sent = FakeClock(), list[dict[str, Any]]()

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1), "server": ("t", 80),
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
    }  # fmt: skip
    with anyio.fail_after(30):
        async with clock.autojump(), fake_system(SCRIPTS, budget=100, clock=clock) as (system, _):
            asgi = app(system)
            with capture_logs() as logs:
                await asgi(scope, receive, send)  # type: ignore[arg-type]
            transport = httpx.ASGITransport(app=asgi)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                ok = await client.post("/v1/chat/completions", json=chat("a"))
    assert sent[0]["status"] != 500
    assert not [e for e in logs if e["event"] == "serve.request_failed"]
    assert ok.status_code == 200
