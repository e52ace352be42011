"""Which resident model drafts for a target's generation (``policies/model_drafts.py``
decides), and how the drafts of each have done so far."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import msgspec
import structlog

from swapos.backends.llama.model_draft import ModelDrafter
from swapos.data.generation import DraftCosts, DraftRequest
from swapos.data.sampling import SamplingParams
from swapos.policies.model_drafts import Drafter, draft_length, pick_drafter

log = structlog.get_logger(__name__)


class Peer(Protocol):
    """A resident model that may draft (``backends/llama/model.py``'s ``LlamaModel``)."""

    @property
    def name(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def kv_window(self) -> int | None: ...
    @property
    def draft_costs(self) -> DraftCosts | None: ...
    @property
    def token_table(self) -> str: ...
    def lend(self) -> contextlib.AbstractContextManager[tuple[Any, int] | None]: ...


class DraftChoice:
    """The drafters of one target model.

    Args:
        owner: the target itself (never its own drafter).
        target: its name.
        token_table: the digest of its token table ("" when unknown).
        costs: its measured drafting costs (None: drafts only when a request pins them).
        window: its sliding attention window (a model with one never borrows a drafter).
        peers: the models resident beside it; None: it never borrows one.
    """

    def __init__(
        self,
        owner: object,
        target: str,
        *,
        token_table: str,
        costs: DraftCosts | None,
        window: int | None,
        peers: Callable[[], Iterable[Peer]] | None,
    ) -> None:
        self._owner = owner
        self._target = target
        self._token_table = token_table
        self.costs = costs
        self._window = window
        self._peers = peers
        self._drafted: dict[str, tuple[int, int]] = {}  # drafter: (accepted, tested) so far

    def choose(
        self, params: SamplingParams, prompt_tokens: int, abort: threading.Event
    ) -> ModelDrafter | None:
        """A resident model to draft for this generation (rule 3 of
        ``policies/model_drafts.py``), or None."""
        request = params.draft or DraftRequest()
        costs = self.costs
        if self._peers is None or self._window is not None or request.model_draft == 0:
            return None
        if costs is None and request.model_draft is None:
            return None
        lenders: dict[str, Peer] = {}
        drafters: list[Drafter] = []
        for peer in self._peers():
            if peer is self._owner or peer.closed or peer.kv_window is not None:
                continue
            theirs = peer.draft_costs
            accepted, tested = self._drafted.get(peer.name, (0, 0))
            lenders[peer.name] = peer
            drafters.append(Drafter(
                name=peer.name,
                same_vocabulary=bool(self._token_table) and peer.token_table == self._token_table,
                step_s=theirs.step_s if theirs else 0.0,
                prefill_s_per_token=theirs.prefill_s_per_token if theirs else 0.0,
                accepted=accepted, tested=tested,
            ))  # fmt: skip
        step_s = costs.step_s if costs else 0.0
        ratio = costs.verify_ratio if costs else ()
        picked = pick_drafter(
            drafters, target_step_s=step_s, verify_ratio=ratio, tokens=params.max_tokens,
            prompt_tokens=prompt_tokens, pinned=request.model_draft,
        )  # fmt: skip
        if picked is None:
            return None
        chosen, first = picked
        log.info("model_draft.chosen", model=self._target, drafter=chosen.name,
                 reason=first.reason)  # fmt: skip

        def length(tokens_left: int) -> int:
            running = msgspec.structs.replace(
                chosen, accepted=chosen.accepted + drafter.accepted,
                tested=chosen.tested + drafter.tested,
            )  # fmt: skip
            return draft_length(
                running, target_step_s=step_s, verify_ratio=ratio, tokens=tokens_left,
                pinned=request.model_draft,
            )  # fmt: skip

        drafter = ModelDrafter(lenders[chosen.name], length, abort)
        return drafter

    def record(self, drafter: ModelDrafter) -> None:
        """Keep what ``drafter``'s drafts were accepted, for this target's next choice."""
        accepted, tested = self._drafted.get(drafter.name, (0, 0))
        self._drafted[drafter.name] = (accepted + drafter.accepted, tested + drafter.tested)
