"""Stop sequences over streamed text: where one starts, how much text to hold back, and a
stream that emits only text no stop sequence can still claim (every backend streams so)."""

from __future__ import annotations

from collections.abc import Iterable


def find_stop(text: str, stops: list[str], emitted: int) -> int | None:
    """Index of the earliest stop sequence in ``text`` not entirely before ``emitted``."""
    longest = max((len(s) for s in stops), default=0)
    start = max(0, emitted - longest + 1)
    found = [i for s in stops if (i := text.find(s, start)) >= 0]
    return min(found) if found else None


def held_back(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of ``text`` that could begin a stop sequence."""
    best = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if s.startswith(text[-n:]):
                best = n
                break
    return best


class StopStream:
    """Generated text streamed through stop sequences, as OpenAI streams it: a stop sequence
    and anything after it are never emitted, and text that could still begin one is held
    back until the next piece shows it does not.

    Attributes:
        text: the answer so far (cut before the stop once one is found).
        stopped: a stop sequence ended the answer.
    """

    def __init__(self, stops: Iterable[str]) -> None:
        self._stops = [s for s in stops if s]
        self._emitted = 0
        self.text = ""
        self.stopped = False

    def add(self, piece: str) -> str:
        """Append ``piece``; return the text now safe to emit ("" once stopped)."""
        if self.stopped:
            return ""
        self.text += piece
        cut = find_stop(self.text, self._stops, self._emitted)
        if cut is not None:
            self.text, self.stopped = self.text[:cut], True
            safe = cut
        else:
            safe = len(self.text) - held_back(self.text, self._stops)
        out, self._emitted = self.text[self._emitted : safe], max(self._emitted, safe)
        return out

    def finish(self, tail: str = "") -> str:
        """End the stream (``tail``: what a decoder still held); return the rest to emit."""
        out = self.add(tail)
        if self.stopped:
            return out
        rest, self._emitted = self.text[self._emitted :], len(self.text)
        return out + rest
