"""``bench long-prompt``'s pure parts: the prompt sized to a token count, and its report (the
run itself needs the real 1.5B and minutes: docs/results/)."""

from __future__ import annotations

import pytest

from swapos.bench.cli import build_parser
from swapos.bench.long_prompt import (
    Ask,
    LongPromptReport,
    Server,
    markdown,
    messages,
    restored_answers_agree,
    sized_file,
    source_file,
)


@pytest.mark.parametrize("tokens", [200, 5000, 16384])
def test_the_file_is_the_longest_that_stays_within_the_tokens(tokens: int) -> None:
    file = sized_file(len, tokens)  # a character per token
    n = file.count("def step_")
    assert len(file) <= tokens < len(source_file(n + 1))
    names = [line for line in file.splitlines() if line.startswith("def ")]
    assert len(set(names)) == len(names) == n  # no function twice


def test_the_question_comes_after_the_file() -> None:
    system, user = messages("def f():\n    pass")
    assert system["role"] == "system" and user["content"].startswith("```python\ndef f()")


def test_the_report_shows_every_request_and_each_check() -> None:
    ask = Ask(name="warm", wall_s=1.5, prompt_tokens=16400, kv_restored_tokens=16399,
              prefill_tokens=1, load_s=0.0, ttft_s=0.1, answer="x")  # fmt: skip
    report = LongPromptReport(
        host={"cpu": "AMD EPYC"}, command="c", run_at="t", profile="default", model="large",
        path="/m.gguf", target_tokens=16384, budget_bytes=3 << 30,
        servers=[Server(asks=[ask], peak_rss_bytes=2 << 30)],
        checks={"peak RSS within the budget": True, "restart: the answer warm gave": False},
    )  # fmt: skip
    text = markdown(report)
    assert "| warm | 16400 | 16399 | 1 | 0.00 | 0.10 | 1.5 | 2048 |" in text
    assert "- met: peak RSS within the budget" in text
    assert "- MISSED: restart: the answer warm gave" in text


def test_only_the_answers_from_the_restored_state_must_agree() -> None:
    def ask(name: str, restored: int, answer: str) -> Ask:
        return Ask(name=name, wall_s=1, prompt_tokens=9, kv_restored_tokens=restored,
                   prefill_tokens=9 - restored, load_s=0, ttft_s=0, answer=answer)  # fmt: skip

    cold, warm = ask("cold", 0, "a b c"), ask("warm", 8, "a b d")
    assert restored_answers_agree([cold, warm, ask("restart", 8, "a b d")])
    assert not restored_answers_agree([cold, warm, ask("restart", 8, "a b e")])


def test_the_command_is_registered() -> None:
    args = build_parser().parse_args(["long-prompt", "--tokens", "8000"])
    assert args.tokens == 8000 and args.budget == "3GiB" and args.model == "large"
