"""Streaming an answer that may hold tool calls: text goes out as it comes, calls once whole.

:class:`CallStream` passes the answer's text through until the model starts a call (the
format's opening mark); text that could be the start of that mark is held back until it is
clearly not. From the mark on nothing more is streamed as text: at the end the whole answer
is parsed (:func:`~swapos.structured.tools.parse_calls`) and the calls go out, or, where the
"call" was not one (it does not parse, or names a function not offered), the held text goes
out as text after all, so nothing the model wrote is lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from swapos.structured.tools import CallFormat, Parsed, opens_call, parse_calls

_PYTHON_TAG = "<|python_tag|>"


class CallStream:
    """Splits a streamed answer into text to send now and calls to send at the end."""

    def __init__(self, fmt: CallFormat, offered: Sequence[str]) -> None:
        self._fmt = fmt
        self._offered = tuple(offered)
        self._mark = fmt.opening.strip() if fmt.closing or fmt.listed else ""
        self._text = ""
        self._sent = 0  # characters of _text already sent as content
        self._held = False  # a call has started: nothing more is sent before the end

    @property
    def text(self) -> str:
        """Everything the model wrote so far."""
        return self._text

    def add(self, piece: str) -> str:
        """Take a piece of the answer; returns the text that can be sent now."""
        self._text += piece
        if self._held:
            return ""
        if self._sent == 0:  # an answer that opens with a bare JSON call is all call
            body = self._text.lstrip().removeprefix(_PYTHON_TAG)
            if _PYTHON_TAG.startswith(self._text.lstrip()):
                return ""
            opening = opens_call(body)
            if opening is None:
                return ""
            if opening:
                self._held = True
                return ""
        if not self._mark:
            return self._send_until(len(self._text))
        start = self._text.find(self._mark, self._sent)
        if start >= 0:
            self._held = True
            return self._send_until(start)
        return self._send_until(len(self._text) - _partial_suffix(self._text, self._mark))

    def _send_until(self, end: int) -> str:
        out = self._text[self._sent : end]
        self._sent = max(self._sent, end)
        return out

    def finish(self) -> tuple[str, Parsed]:
        """The answer is complete: (text still to send, the answer parsed).

        The text still to send is what was held back, unless it was read as calls: then
        only what follows the calls (if anything) is."""
        parsed = parse_calls(self._fmt, self._text, self._offered)
        unsent = self._text[self._sent :]
        if not parsed.calls:
            return unsent, parsed
        sent = self._text[: self._sent].strip()
        rest = parsed.content
        if sent and rest.startswith(sent):
            rest = rest[len(sent) :]
        return rest.strip(), parsed


def _partial_suffix(text: str, mark: str) -> int:
    """The length of the longest end of ``text`` that begins ``mark`` (held back: it may
    become the mark)."""
    for n in range(min(len(mark) - 1, len(text)), 0, -1):
        if mark.startswith(text[-n:]):
            return n
    return 0
