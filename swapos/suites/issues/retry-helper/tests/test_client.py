import ast
from pathlib import Path

import pytest

import solution


class FlakyTransport:
    def __init__(self, fail_times, responses):
        self.fail_times = fail_times
        self.responses = responses
        self.calls = []

    def get(self, path):
        self.calls.append(path)
        if len(self.calls) <= self.fail_times:
            raise ConnectionError(f"down {len(self.calls)}")
        return self.responses[path]


RESPONSES = {
    "/users/7": {"id": 7},
    "/users/7/orders": [{"id": 1}],
    "/ping": "pong",
}


def client(fail_times, attempts=3):
    sleeps = []
    c = solution.Client(
        FlakyTransport(fail_times, RESPONSES), attempts=attempts, backoff=0.5, sleep=sleeps.append
    )
    return c, sleeps


def test_behaviour_success_after_retries():
    c, sleeps = client(2)
    assert c.fetch_user(7) == {"id": 7}
    assert sleeps == [0.5, 1.0] and c.failures == 2
    assert c.fetch_orders(7) == [{"id": 1}]
    assert c.ping() is True


def test_behaviour_gives_up_with_last_error():
    c, sleeps = client(10, attempts=3)
    with pytest.raises(ConnectionError, match="down 3"):
        c.ping()
    assert sleeps == [0.5, 1.0] and c.failures == 3


def test_structure_with_retries_works_on_any_call():
    c, sleeps = client(0)
    state = {"n": 0}

    def flaky():
        state["n"] += 1
        if state["n"] < 3:
            raise ConnectionError("x")
        return 42

    assert c.with_retries(flaky) == 42
    assert sleeps == [0.5, 1.0] and c.failures == 2


def test_structure_only_with_retries_loops_or_tries():
    tree = ast.parse(Path(solution.__file__).read_text())
    offenders = set()
    for func in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        for node in (n for stmt in func.body for n in ast.walk(stmt)):
            if isinstance(node, (ast.For, ast.While, ast.Try)):
                offenders.add(func.name)
    assert offenders == {"with_retries"}
