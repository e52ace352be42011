"""``RoutingBackend``: one backend per kind of spec, behind the one ``ModelBackend``.

A system has one backend; a profile may mix local files and remote endpoints. This backend
sends each call to the local backend (llama-cpp-python by default) or, for a spec with
``api`` set, to the remote one, so the actors never know the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swapos.backends.base import LoadedModel, ModelBackend
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat, FimTokens
from swapos.policies.spending import ModelCost


class RoutingBackend:
    """Dispatches per spec: remote specs to ``remote``, the others to ``local``
    (implements ``ModelBackend``).

    Args:
        local: loads model files.
        remote: serves remote models (default: :class:`~swapos.backends.api.ApiBackend`).
    """

    def __init__(self, local: ModelBackend, remote: ModelBackend | None = None) -> None:
        if remote is None:
            from swapos.backends.api import ApiBackend

            remote = ApiBackend()
        self.local = local
        self.remote = remote

    def backend_for(self, spec: ModelSpec) -> ModelBackend:
        """The backend that serves ``spec``."""
        return self.remote if spec.remote else self.local

    def estimate_footprint(self, spec: ModelSpec) -> int:
        return self.backend_for(spec).estimate_footprint(spec)

    def estimate_device_footprint(self, spec: ModelSpec) -> int:
        return self.backend_for(spec).estimate_device_footprint(spec)

    def estimate_state_bytes(self, spec: ModelSpec) -> int:
        return self.backend_for(spec).estimate_state_bytes(spec)

    def draw_curve(self, spec: ModelSpec) -> dict[int, float]:
        return self.backend_for(spec).draw_curve(spec)

    def check_devices(self, specs: Sequence[ModelSpec]) -> None:
        self.local.check_devices([s for s in specs if not s.remote])
        self.remote.check_devices([s for s in specs if s.remote])

    async def load(
        self, spec: ModelSpec, *, progress: Callable[[float], None] | None = None
    ) -> LoadedModel:
        return await self.backend_for(spec).load(spec, progress=progress)

    async def warm(self, spec: ModelSpec) -> None:
        await self.backend_for(spec).warm(spec)

    async def drop_page_cache(self, spec: ModelSpec) -> bool:
        return await self.backend_for(spec).drop_page_cache(spec)

    def chat_format(self, spec: ModelSpec) -> ChatFormat | None:
        return self.backend_for(spec).chat_format(spec)

    def token_counter(self, spec: ModelSpec) -> Callable[[str], int]:
        return self.backend_for(spec).token_counter(spec)

    def fim_tokens(self, spec: ModelSpec) -> FimTokens | None:
        return self.backend_for(spec).fim_tokens(spec)

    def model_cost(self, spec: ModelSpec) -> ModelCost | None:
        return self.backend_for(spec).model_cost(spec)
