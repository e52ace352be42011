"""A small API client over an injected transport."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Transport(Protocol):
    def get(self, path: str) -> Any: ...


class Client:
    """Calls ``transport.get`` with retries on ``ConnectionError``."""

    def __init__(
        self,
        transport: Transport,
        *,
        attempts: int = 3,
        backoff: float = 0.2,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.transport = transport
        self.attempts = attempts
        self.backoff = backoff
        self.sleep = sleep
        self.failures = 0

    def with_retries(self, call: Callable[[], T]) -> T:
        """``call()``, retried on ConnectionError up to ``self.attempts`` times."""
        for attempt in range(1, self.attempts + 1):
            try:
                return call()
            except ConnectionError:
                self.failures += 1
                if attempt == self.attempts:
                    raise
                self.sleep(self.backoff * attempt)
        raise AssertionError("unreachable")

    def fetch_user(self, user_id: int) -> dict[str, Any]:
        return self.with_retries(lambda: dict(self.transport.get(f"/users/{user_id}")))

    def fetch_orders(self, user_id: int) -> list[dict[str, Any]]:
        return self.with_retries(lambda: list(self.transport.get(f"/users/{user_id}/orders")))

    def ping(self) -> bool:
        return self.with_retries(lambda: self.transport.get("/ping") == "pong")
