"""``python -m swapos.run`` on the fake backend in real time, for the interrupt tests.

``python tests/run_driver.py OUT BACKEND`` runs :func:`swapos.run.main` with the fake
backend (slow tokens, so a signal lands mid-generation), the fake pipeline profile and the
one-line bugfix task; exits with ``main``'s status.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swapos import run as run_module
from swapos.actors.system import open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.clock import MonotonicClock
from swapos.errors import SwapOSError
from swapos.models.spec import ModelSpec
from tests.fakes import ADD_TASK, pipeline_profile

NAMES = ("planner", "coder", "critic")


@contextlib.asynccontextmanager
async def _failing_system(reason: str, *args: object, **kwargs: object) -> AsyncIterator[None]:
    raise SwapOSError(reason)
    yield


def main() -> int:
    out, backend = sys.argv[1], sys.argv[2]
    clock = MonotonicClock()
    fail = os.environ.get("SWAPOS_DRIVER_FAIL_LOAD")  # every load fails with this reason
    script = FakeModelScript(reply="one two " * 60, load_s=0.05, token_s=0.05, fail_load=fail)
    scripts = dict.fromkeys(NAMES, script)
    fake = FakeBackend(clock, scripts)
    specs = {n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf") for n in NAMES}
    # overhead 0: the budget of the fake profile is the fake models', not this test process's
    run_module.open_system = partial(  # type: ignore[assignment]
        open_system, backend=fake, clock=clock, overhead_bytes=0
    )
    if reason := os.environ.get("SWAPOS_DRIVER_FAIL_OPEN"):  # the system fails to open
        run_module.open_system = partial(_failing_system, reason)  # type: ignore[assignment]
    run_module._profile = lambda _: pipeline_profile()
    run_module.checked_model_specs = lambda _: specs
    run_module.resolve_task = lambda _: ADD_TASK
    return run_module.main(["--out", out, "--async-backend", backend, "--no-kv-cache"])


if __name__ == "__main__":
    sys.exit(main())
