"""The Loader's memory accounting: the ledger, the KV tier's share, what the RSS shows.

The Loader asks this object, and only it, about memory:

- the ledger (:class:`~swapos.policies.ledger.Ledger`): every model's state, bytes and
  leases under the host and device budgets;
- whether a claim can ever fit (:meth:`MemoryAccount.too_big`);
- the KV cache's RAM tier's share of a process budget (:meth:`MemoryAccount.kv_share`,
  :func:`~swapos.policies.ledger.kv_room`): what the overhead, the models' claims and one
  KV state in flight leave, at most the tier's own size;
- what the process's RSS holds above the budget when a lease is released
  (:meth:`MemoryAccount.released`, with ``watch_rss``): memory the ledger does not see
  (weights paged in after the load, the interpreter's growth). It comes off the tier's
  share from then on (``unseen_bytes``; it only grows).

Without ``kv_ram_bytes`` the KV tier is outside the budget and has no share.
"""

from __future__ import annotations

from collections.abc import Mapping

from swapos.backends.base import ModelBackend
from swapos.data.lifecycle import Lifecycle
from swapos.errors import SwapOSError
from swapos.models.spec import ModelSpec
from swapos.policies.ledger import Ledger, kv_room, pinned_bytes
from swapos.sysinfo import peak_rss_bytes, rss_bytes

MIB = 2**20


class MemoryAccount:
    """The ledger of one Loader, and the memory arithmetic around it."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        backend: ModelBackend,
        specs: Mapping[str, ModelSpec],
        kv_ram_bytes: int | None = None,
        watch_rss: bool = False,
    ) -> None:
        self.ledger = ledger
        self._backend = backend
        self._specs = specs
        self._kv_cap = kv_ram_bytes
        self._watch_rss = watch_rss and kv_ram_bytes is not None
        self._kv_sent: int | None = None
        self._unseen = 0
        self._state_bytes: dict[str, int] = {}

    @property
    def unseen_bytes(self) -> int:
        """Process RSS seen above the budget at lease releases (off the KV tier's share)."""
        return self._unseen

    @property
    def kv_sent(self) -> int | None:
        """The KV tier's share last sent to the KV cache (None: none sent, or no tier)."""
        return self._kv_sent

    def released(self) -> None:
        """A lease was released: a generation just ended, the model's pages are in. With
        ``watch_rss``, what the process held above the budget during the phase (its peak,
        reset at the phase's start) is counted as unseen."""
        if self._watch_rss:
            held = max(rss_bytes(), peak_rss_bytes())
            self._unseen += max(0, held - self.ledger.budget_bytes)

    def too_big(self, name: str, nbytes: int, device_nbytes: int) -> str:
        """Why a claim of ``nbytes`` host and ``device_nbytes`` device bytes for ``name``
        can never fit (it is bigger than a whole budget, or than what pinned models leave of
        it), or ""."""
        budget = self.ledger.budget("host")
        device_budget = self.ledger.device_budget_bytes
        pinned = pinned_bytes(self.ledger.claims(excluding=name))
        if nbytes <= budget < nbytes + pinned:
            return (
                f"model {name!r} needs ~{nbytes / MIB:.0f} MiB but pinned models hold "
                f"{pinned / MIB:.0f} MiB of the models' {budget / MIB:.0f} MiB budget and are "
                "never evicted: unload one (POST /unload), drop its `pin`, or raise `budget`"
            )
        if nbytes > budget:
            why = (
                f"model {name!r} needs ~{nbytes / MIB:.0f} MiB but the models' whole budget is "
                f"{budget / MIB:.0f} MiB: raise `budget` in the profile or use a smaller "
                "model/quantization"
            )
            if self.ledger.overhead_bytes:
                why += (
                    f" (the budget covers the process: {self.ledger.overhead_bytes / MIB:.0f} "
                    "MiB of it are SwapOS's own)"
                )
            return why
        if device_nbytes > device_budget:
            return (
                f"model {name!r} needs ~{device_nbytes / MIB:.0f} MiB of GPU memory but "
                f"`device_budget` is {device_budget / MIB:.0f} MiB: raise `device_budget`, or "
                "offload fewer layers (`gpu_layers`)"
            )
        return ""

    # --- the KV tier's share --------------------------------------------------------------

    def kv_share(self) -> int | None:
        """The KV RAM tier's share of the process budget now (None: it has none)."""
        if self._kv_cap is None:
            return None
        ledger = self.ledger
        return kv_room(
            ledger.budget_bytes, overhead=ledger.overhead_bytes + self._unseen,
            models=ledger.used_bytes() + self._save_reserve(), cap=self._kv_cap,
        )  # fmt: skip

    def kv_resize_due(self) -> int | None:
        """The tier's share when it differs from the one last sent, else None."""
        share = self.kv_share()
        return share if share is not None and share != self._kv_sent else None

    def kv_sending(self, share: int) -> None:
        """``share`` is on its way to the KV cache."""
        self._kv_sent = share

    def _save_reserve(self) -> int:
        """Room kept free for one KV state in flight: a state a loading (or ready) model
        saves exists in full before the KV tier drops what it must to take it, so the
        largest one such a model can save is kept out of the tier's share."""
        held = (Lifecycle.LOADING, Lifecycle.READY)
        names = (n for n in self._specs if self.ledger.status(n) in held)
        return max((self._state_bytes_of(n) for n in names), default=0)

    def _state_bytes_of(self, name: str) -> int:
        """The largest KV state ``name`` can save (asked of the backend once)."""
        if name not in self._state_bytes:
            try:
                self._state_bytes[name] = self._backend.estimate_state_bytes(self._specs[name])
            except SwapOSError:  # an unreadable file fails its load, with its own error
                self._state_bytes[name] = 0
        return self._state_bytes[name]
