"""OpenAI's predicted outputs: ``swapos serve`` hands the prediction to the decode loop as a
draft source (the answer stays the model's), and refuses a prediction of another type."""

from __future__ import annotations

import anyio
from serve_fakes import chat, in_process

from swapos.backends.fake_script import FakeModelScript
from swapos.testing import FakeClock

SCRIPTS = {"a": FakeModelScript(reply="def f(): return 1", load_s=1.0, token_s=0.5)}


async def test_a_predicted_output_reaches_the_decode_loop_as_a_draft_source() -> None:
    clock = FakeClock()
    with anyio.fail_after(30):
        async with clock.autojump(), in_process(SCRIPTS, budget=200, clock=clock) as s:
            predicted = {"type": "content", "content": "def f(): return 0"}
            r = await s.client.post("/v1/chat/completions", json=chat("a", prediction=predicted))
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"] == "def f(): return 1"
            parts = {
                "type": "content",
                "content": [
                    {"type": "text", "text": "def "},
                    {"type": "text", "text": "g(): pass"},
                ],
            }
            r = await s.client.post("/v1/chat/completions", json=chat("a", prediction=parts))
            assert r.status_code == 200, r.text
            r = await s.client.post("/v1/chat/completions", json=chat("a"))
            assert r.status_code == 200, r.text
    drafts = [params.draft for _, params in s.backend.params]
    assert [d.prediction if d else None for d in drafts] == [
        "def f(): return 0",
        "def g(): pass",
        "",
    ]
    assert [d.kind if d else None for d in drafts] == ["prediction", "prediction", "serve"]


async def test_a_prediction_of_another_type_is_refused_naming_the_field() -> None:
    clock = FakeClock()
    with anyio.fail_after(30):
        async with clock.autojump(), in_process(SCRIPTS, budget=200, clock=clock) as s:
            bad = {"type": "image", "content": "x"}
            r = await s.client.post("/v1/chat/completions", json=chat("a", prediction=bad))
            assert r.status_code == 400
            assert r.json()["error"]["param"] == "prediction"
            assert not s.backend.params
