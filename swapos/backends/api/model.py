"""A remote model: one OpenAI-compatible endpoint, reached with an httpx async client."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import cast

import anyio
import httpx
import msgspec

from swapos.backends.api import wire
from swapos.backends.base import GenerationOutput
from swapos.backends.errors import map_exceptions
from swapos.data.prefix import PrefixState
from swapos.data.residency import Offload
from swapos.data.sampling import SamplingParams
from swapos.errors import GenerationError
from swapos.models.spec import ModelSpec, RemoteEndpoint
from swapos.models.templates import TemplateError, decode_messages

HTTP_ERRORS: tuple[type[Exception], ...] = (
    httpx.HTTPError,  # connect, read, write, protocol errors and timeouts
    httpx.StreamError,
    msgspec.DecodeError,  # a chunk that is not one
)
"""What talking to an endpoint can raise that is the endpoint's failure, not ours."""


class ApiModel:
    """A model served by an OpenAI-compatible endpoint (implements ``LoadedModel`` and
    ``TextPromptModel``).

    It holds no local memory (footprint 0) and no KV state: each generation sends the whole
    prompt, and whatever prefix cache the server keeps is the server's. Generations may run
    concurrently (the server queues them).

    Args:
        spec: the remote spec (``spec.api`` set).
        client: the HTTP client it owns (closed by :meth:`close`), with the endpoint's base
            URL, bearer key and timeouts.
    """

    def __init__(self, spec: ModelSpec, client: httpx.AsyncClient) -> None:
        assert spec.api is not None
        self._spec = spec
        self._api: RemoteEndpoint = spec.api
        self._client = client
        self._closed = False

    @property
    def spec(self) -> ModelSpec:
        return self._spec

    @property
    def footprint_bytes(self) -> int:
        """0: a remote model never counts against the local budget."""
        return 0

    @property
    def offload(self) -> Offload | None:
        """None: nothing is held locally."""
        return None

    @property
    def kv_identity(self) -> str:
        """The endpoint and model name (no local state is ever saved under it)."""
        return f"remote:{self._api.base}#{self._api.model}"

    @property
    def kv_window(self) -> int | None:
        """None: nothing is ever restored locally."""
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    async def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Not available: the endpoint tokenizes. The Generator sends text instead.

        Raises:
            GenerationError: always.
        """
        raise GenerationError(self._no_tokens())

    async def generate(
        self,
        prompt: list[int],
        params: SamplingParams,
        *,
        restore: PrefixState | None = None,
        save_at: int | None = None,
        save_final: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> GenerationOutput:
        """Not available: a remote model takes text (:meth:`generate_text`).

        Raises:
            GenerationError: always.
        """
        raise GenerationError(self._no_tokens())

    def _no_tokens(self) -> str:
        return (
            f"remote model {self._spec.name!r} ({self._api.base}) takes text prompts, not "
            "tokens; call generate_text"
        )

    async def generate_text(
        self,
        prompt: str,
        params: SamplingParams,
        *,
        chat: bool,
        on_token: Callable[[str], None] | None = None,
    ) -> GenerationOutput:
        """Stream a completion of ``prompt`` from the endpoint (see ``TextPromptModel``).

        A chat prompt (``chat``) is the JSON conversation the pipeline rendered for a
        ``messages`` format and goes to ``/chat/completions`` (asking the endpoint to continue
        a final assistant message when it ``continues`` one); any other prompt is text for
        ``/completions``. On cancellation the response is closed (the server sees the
        client go) within one streamed piece, and the cancellation is re-raised.

        Raises:
            GenerationError: the model is closed, the prompt is not a conversation, or the
                endpoint failed, answered with an error status, timed out or streamed
                something that is not a chunk; the message names the URL.
        """
        if self._closed:
            raise GenerationError(f"remote model {self._spec.name!r} is closed; load it again")
        if chat:
            try:
                messages = decode_messages(prompt)
            except TemplateError as exc:
                raise GenerationError(
                    f"chat prompt for remote model {self._spec.name!r}: {exc}; render it "
                    "with the model's chat format (ChatFormat.messages)"
                ) from exc
            path = "/chat/completions"
            body = wire.request_body(
                self._api.model,
                params,
                messages=messages,
                continue_final=self._api.continues
                and bool(messages)
                and messages[-1].role == "assistant",
            )
        else:
            path = "/completions"
            body = wire.request_body(self._api.model, params, messages=None, prompt=prompt)
        url = f"{self._api.base}{path}"
        started = time.perf_counter()
        tally = wire.StreamTally()
        with self._edge(url):
            async with self._client.stream("POST", path, json=body) as response:
                await self._check(response, url)
                # Read to the end of the body, past [DONE]: httpx's nested async generators
                # are only closed when exhausted (encode/httpx#3686; trio warns otherwise).
                async with contextlib.aclosing(_generator(response.aiter_lines())) as lines:
                    async for line in lines:
                        data = wire.sse_data(line)
                        if not data or data == wire.DONE:
                            continue
                        now = time.perf_counter() - started
                        piece = tally.add(wire.decode_chunk(data), now)
                        if piece and on_token is not None:
                            on_token(piece)
        stats = tally.stats(time.perf_counter() - started)
        return GenerationOutput(text=tally.text, stats=stats)

    async def _check(self, response: httpx.Response, url: str) -> None:
        """Raise what an error status says.

        Raises:
            GenerationError: the status is 400 or above (the message quotes the server).
        """
        if response.status_code >= 400:
            detail = wire.error_message(await response.aread())
            raise GenerationError(
                f"remote model {self._spec.name!r}: {url} answered {response.status_code}: {detail}"
            )

    @contextlib.contextmanager
    def _edge(self, url: str) -> Iterator[None]:
        """Maps what the HTTP client raises to :class:`GenerationError` naming ``url``; a
        timeout says which limit it hit."""
        try:
            with map_exceptions(
                {HTTP_ERRORS: GenerationError},
                f"generating with remote model {self._spec.name!r} at {url}",
                advice=f"check that the server is running and serves {self._api.model!r}",
            ):
                yield
        except GenerationError as exc:
            if isinstance(exc.__cause__, httpx.TimeoutException):
                raise GenerationError(
                    f"remote model {self._spec.name!r}: {url} did not answer within "
                    f"api_timeout_s={self._api.timeout_s:g} s "
                    f"({type(exc.__cause__).__name__}); raise it in the profile or check "
                    "the server"
                ) from exc.__cause__
            raise

    async def close(self) -> None:
        """Close the HTTP client (shielded). Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._client.aclose()


def _generator(lines: AsyncIterator[str]) -> AsyncGenerator[str]:
    """httpx types ``aiter_lines()`` as an iterator; it is an async generator (closable)."""
    return cast("AsyncGenerator[str]", lines)
