"""The server process's memory during the slot soak: its RSS from ``/proc/PID/status``, and
the bytes its KV cache's RAM tier holds, tallied from the event log as the server writes it
(``KVSaved`` to the RAM tier adds a state, ``KVDropped`` from it takes one away)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import msgspec

from swapos.bench.soak_slots.checks import RssSample, vmrss_bytes


class _KVEvent(msgspec.Struct, kw_only=True):
    type: str
    nbytes: int = 0
    tier: str = "ram"


_DECODE = msgspec.json.Decoder(_KVEvent)
_KV_TYPES = (b'"type":"KVSaved"', b'"type":"KVDropped"')


class KVTally:
    """The KV RAM tier's bytes, from the lines appended to an event log since the last read."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.ram_bytes = 0
        self._offset = 0
        self._partial = b""

    def update(self) -> int:
        """Read what the log gained; the tier's bytes now."""
        try:
            with self.log.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return self.ram_bytes
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # a line still being written (or b"")
        for line in lines:
            if any(kind in line for kind in _KV_TYPES):
                self._count(line)
        return self.ram_bytes

    def _count(self, line: bytes) -> None:
        try:
            event = _DECODE.decode(line)
        except msgspec.DecodeError:
            return
        if event.type == "KVSaved" and "ram" in event.tier.split("+"):
            self.ram_bytes += event.nbytes
        elif event.type == "KVDropped" and event.tier == "ram":
            self.ram_bytes = max(0, self.ram_bytes - event.nbytes)


class Sampler:
    """Samples the process ``pid`` and the tally of its event log ``log``."""

    def __init__(self, pid: int, log: Path) -> None:
        self.status = Path(f"/proc/{pid}/status")
        self.kv = KVTally(log)
        self.samples: list[RssSample] = []
        self.t0 = time.perf_counter()

    def sample(self) -> RssSample:
        """One sample now (appended to :attr:`samples`).

        Raises:
            OSError, ValueError: the process is gone.
        """
        rss = vmrss_bytes(self.status.read_text())
        s = RssSample(
            t_s=time.perf_counter() - self.t0, rss_bytes=rss, kv_ram_bytes=self.kv.update()
        )
        self.samples.append(s)
        return s

    async def every(self, seconds: float, stop: anyio.Event) -> None:
        """A sample now and every ``seconds`` until ``stop`` is set."""
        while not stop.is_set():
            self.sample()
            with anyio.move_on_after(seconds):
                await stop.wait()
