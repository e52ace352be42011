"""Test helpers users can import for their own tests: a virtual clock and a scripted backend."""

from __future__ import annotations

from swapos.backends.fake import FakeBackend as FakeBackend
from swapos.backends.fake_script import FakeFaults as FakeFaults
from swapos.backends.fake_script import FakeModelScript as FakeModelScript
from swapos.testing.clock import FakeClock as FakeClock
