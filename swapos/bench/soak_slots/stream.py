"""Reading one streamed chat completion, line by line, and judging it well formed.

Pure (no I/O): :class:`StreamReader` is fed the response's lines as they come. A well-formed
stream is SSE ``data:`` events of chunks that all carry one response id, comments (``:``,
the server's heartbeats) and blank lines between them, a last chunk with a
``finish_reason`` and ``usage``, then ``data: [DONE]`` and nothing after it. An ``error``
event, a line that is none of these, a chunk that does not decode, or a second id makes it
malformed (its first problem is kept).
"""

from __future__ import annotations

import msgspec


class _Delta(msgspec.Struct, frozen=True, kw_only=True):
    content: str | None = None


class _Choice(msgspec.Struct, frozen=True, kw_only=True):
    delta: _Delta = _Delta()
    finish_reason: str | None = None


class _Usage(msgspec.Struct, frozen=True, kw_only=True):
    completion_tokens: int


class _Chunk(msgspec.Struct, frozen=True, kw_only=True):
    id: str | None = None
    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: dict[str, object] | None = None


_DECODE = msgspec.json.Decoder(_Chunk)


class StreamReader:
    """The state of one streamed response read so far.

    Attributes:
        response_id: the id its chunks carry (the server's task id in its event log).
        content_chunks: chunks that carried generated text.
        finish_reason: the last chunk's, once it came.
        tokens: ``usage.completion_tokens`` of the last chunk, once it came.
        done: ``data: [DONE]`` came.
        problem: what first made the stream malformed (None: nothing yet).
    """

    def __init__(self) -> None:
        self.response_id: str | None = None
        self.content_chunks = 0
        self.finish_reason: str | None = None
        self.tokens: int | None = None
        self.done = False
        self.problem: str | None = None

    @property
    def complete(self) -> bool:
        """Ended well: a last chunk with its finish reason and usage, then ``[DONE]``."""
        return (
            self.done
            and self.problem is None
            and self.finish_reason is not None
            and self.tokens is not None
        )

    def feed(self, line: str) -> None:
        """Read one line of the response (without its newline)."""
        if self.problem is not None:
            return
        if not line or line.startswith(":"):
            return  # between events, or a heartbeat comment
        if not line.startswith("data: "):
            self._fail(f"not an SSE line: {line[:80]!r}")
            return
        payload = line.removeprefix("data: ")
        if self.done:
            self._fail(f"an event after [DONE]: {payload[:80]!r}")
        elif payload == "[DONE]":
            self.done = True
            if self.finish_reason is None:
                self._fail("[DONE] before a chunk with a finish_reason")
        else:
            self._chunk(payload)

    def _chunk(self, payload: str) -> None:
        try:
            chunk = _DECODE.decode(payload)
        except msgspec.DecodeError as exc:
            self._fail(f"a chunk that does not decode ({exc}): {payload[:80]!r}")
            return
        if chunk.error is not None:
            self._fail(f"an error event: {chunk.error.get('message', chunk.error)}")
            return
        if chunk.id is None or (self.response_id is not None and chunk.id != self.response_id):
            self._fail(f"chunk id {chunk.id!r} after {self.response_id!r}")
            return
        self.response_id = chunk.id
        if self.finish_reason is not None:
            self._fail("a chunk after the one with the finish_reason")
            return
        for choice in chunk.choices:
            if choice.delta.content:
                self.content_chunks += 1
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        if self.finish_reason is not None:
            if chunk.usage is None:
                self._fail("the last chunk has no usage")
            else:
                self.tokens = chunk.usage.completion_tokens

    def _fail(self, problem: str) -> None:
        self.problem = problem
