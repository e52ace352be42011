"""``ApiBackend``: remote models on OpenAI-compatible endpoints, as a ``ModelBackend``."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

import httpx
import msgspec
import structlog

from swapos.backends.api import wire
from swapos.backends.api.model import HTTP_ERRORS, ApiModel
from swapos.errors import ModelFileError
from swapos.models.spec import ModelSpec, RemoteEndpoint
from swapos.models.templates import MESSAGES, MESSAGES_CONTINUED, ChatFormat, FimTokens
from swapos.policies.spending import ModelCost

log = structlog.get_logger(__name__)

CONNECT_TIMEOUT_S = 10.0
"""Bound on opening a connection (the reachability check and every request)."""

CHARS_PER_TOKEN = 3.0
"""The token estimate of a remote model, whose tokenizer is not here: one token per this
many characters, rounded up. BPE tokenizers of code average 3.5 to 4 characters per token, so
the estimate errs high and prompt budgets stay within the server's context."""


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as :data:`CHARS_PER_TOKEN` estimates them (at least 1)."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class ApiBackend:
    """Serves remote models (``spec.api`` set) through OpenAI-compatible endpoints
    (implements ``ModelBackend``; works on asyncio and trio, as httpx does through anyio).

    "Loading" a remote model is a reachability check, ``GET {api_base}/models``, that opens
    the model's HTTP client; nothing is held locally (footprint 0), there is no file to warm
    or drop from the page cache, and the chat format is :data:`MESSAGES`: the pipeline's
    conversations are sent as messages for the server to template.
    """

    def estimate_footprint(self, spec: ModelSpec) -> int:
        """0: a remote model never counts against the local budget."""
        return 0

    def estimate_device_footprint(self, spec: ModelSpec) -> int:
        """0: the endpoint's GPU is not ours to budget."""
        return 0

    def estimate_state_bytes(self, spec: ModelSpec) -> int:
        """0: a remote model's KV state is the endpoint's."""
        return 0

    def draw_curve(self, spec: ModelSpec) -> dict[int, float]:
        """Empty: a remote model's draws go in turn (the endpoint batches as it likes)."""
        return {}

    def check_devices(self, specs: Sequence[ModelSpec]) -> None:
        """Nothing to check (``check_profile`` refuses ``gpu_layers`` on a remote model)."""

    async def load(
        self, spec: ModelSpec, *, progress: Callable[[float], None] | None = None
    ) -> ApiModel:
        """Open a client for ``spec``'s endpoint and check that it answers ``GET /models``
        (``progress`` is not told anything: the endpoint's loads are its own).

        Raises:
            ModelFileError: the key's environment variable is not set, or the endpoint is
                unreachable, times out or answers with an error (the message names the URL).

        On cancellation the client is closed and the cancellation re-raised.
        """
        api = _endpoint(spec)
        client = httpx.AsyncClient(
            base_url=api.base,
            headers=_headers(spec, api),
            timeout=httpx.Timeout(api.timeout_s, connect=min(api.timeout_s, CONNECT_TIMEOUT_S)),
        )
        model = ApiModel(spec, client)
        try:
            served = await _served_models(spec, api, client)
        except BaseException:
            await model.close()
            raise
        if served and api.model not in served:
            log.warning(
                "remote_model.not_listed", model=spec.name, url=api.base, api_model=api.model,
                served=sorted(served)[:10],
            )  # fmt: skip
        log.info("remote_model.reachable", model=spec.name, url=api.base)
        return model

    async def warm(self, spec: ModelSpec) -> None:
        """Nothing to warm: there is no local file."""

    async def drop_page_cache(self, spec: ModelSpec) -> bool:
        """False: there is no local file."""
        return False

    def chat_format(self, spec: ModelSpec) -> ChatFormat | None:
        """The server applies its own template: :data:`~swapos.models.templates.MESSAGES`,
        or :data:`~swapos.models.templates.MESSAGES_CONTINUED` for an endpoint that
        continues a final assistant message."""
        return MESSAGES_CONTINUED if _endpoint(spec).continues else MESSAGES

    def token_counter(self, spec: ModelSpec) -> Callable[[str], int]:
        """An estimate (:func:`estimate_tokens`): the remote tokenizer is not reachable."""
        return estimate_tokens

    def fim_tokens(self, spec: ModelSpec) -> FimTokens | None:
        """None: a remote chat API takes no raw special tokens."""
        return None

    def model_cost(self, spec: ModelSpec) -> ModelCost | None:
        """None: a remote model's costs are not measured here."""
        return None


def _endpoint(spec: ModelSpec) -> RemoteEndpoint:
    if spec.api is None:
        raise ModelFileError(
            f"model {spec.name!r} is not a remote model (no api_base); load it with a local backend"
        )
    return spec.api


def _headers(spec: ModelSpec, api: RemoteEndpoint) -> dict[str, str]:
    if api.key_env is None:
        return {}
    key = os.environ.get(api.key_env)
    if not key:
        raise ModelFileError(
            f"remote model {spec.name!r}: environment variable {api.key_env} (api_key_env) is "
            "not set; export the endpoint's key in it"
        )
    return {"Authorization": f"Bearer {key}"}


async def _served_models(
    spec: ModelSpec, api: RemoteEndpoint, client: httpx.AsyncClient
) -> set[str]:
    """The model ids ``GET /models`` lists.

    Raises:
        ModelFileError: unreachable, timed out, an error status, or not a model list.
    """
    url = f"{api.base}/models"
    try:
        response = await client.get("/models")
        body = await response.aread()
        if response.status_code >= 400:
            raise ModelFileError(
                f"remote model {spec.name!r}: {url} answered {response.status_code}: "
                f"{wire.error_message(body)}; check api_base and the key (api_key_env)"
            )
        listing = msgspec.json.decode(body, type=wire.ModelList)
    except HTTP_ERRORS as exc:
        detail = str(exc) or type(exc).__name__
        raise ModelFileError(
            f"remote model {spec.name!r}: {url} is not reachable as an OpenAI-compatible "
            f"API ({detail}); check that the server runs and api_base ends in /v1"
        ) from exc
    return {entry.id for entry in listing.data}
