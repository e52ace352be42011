"""Shared fixtures: every async test runs on asyncio *and* trio."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both anyio backends, listed explicitly so a missing trio fails instead of vanishing."""
    return str(request.param)
