"""The Aider-style trace ``bench serve`` replays: pure data, built the same way every time.

Aider's architect mode sends each user request to a strong *architect* model, which says what
to change, then hands that answer to a cheaper *editor* model, which writes the edit. A
session alternates ``architect, editor, architect, editor, ...``; several sessions (several
developers, or several agents) share the one server.

Every request is fixed in advance, so both servers get exactly the same work: the user turns,
and the assistant turns that enter each conversation's history, are scripted here (never the
model's actual output), and every request asks for ``max_tokens`` at temperature 0 with a
fixed seed. Each session keeps one conversation per model that grows by a user turn and a
scripted answer per round, so round ``r``'s prompt begins with round ``r-1``'s: a server that
keeps the KV prefix of each conversation re-reads only the new turns.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

Role = Literal["architect", "editor"]

ARCHITECT_SYSTEM: Final = (
    "You are the architect. Read the user's request and the code, then say precisely which "
    "functions to change and how, in short numbered steps. Do not write the code."
)
EDITOR_SYSTEM: Final = (
    "You are the editor. Apply the architect's instructions to the file and reply with the "
    "complete changed function in one ```python block."
)

_PROJECTS: Final = (
    (
        "inventory.py",
        "def restock(items, threshold):\n    out = []\n    for name, count in items.items():\n"
        "        if count < threshold:\n            out.append(name)\n    return out\n",
        ("sort the result by name", "skip items whose name starts with an underscore",
         "return (name, missing) pairs where missing = threshold - count",
         "accept a per-item threshold dict, falling back to the default",
         "raise ValueError on a negative count"),
    ),
    (
        "ratelimit.py",
        "class Bucket:\n    def __init__(self, rate, burst):\n        self.rate = rate\n"
        "        self.burst = burst\n        self.tokens = burst\n\n"
        "    def take(self, now):\n        if self.tokens > 0:\n            self.tokens -= 1\n"
        "            return True\n        return False\n",
        ("refill tokens from the time elapsed since the last take",
         "let take() ask for n tokens at once", "never exceed burst when refilling",
         "add a wait_time(now) that says when the next token is ready",
         "make the bucket safe to share between threads"),
    ),
    (
        "report.py",
        "def summarize(rows):\n    total = 0\n    for row in rows:\n"
        "        total += row['amount']\n    return {'total': total}\n",
        ("add the count of rows", "group the totals by row['category']",
         "ignore rows whose amount is None", "add the mean amount per category",
         "round every amount to two decimals"),
    ),
)  # fmt: skip


class Message(msgspec.Struct, frozen=True, kw_only=True):
    role: Literal["system", "user", "assistant"]
    content: str


class TraceRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One request of the trace.

    Attributes:
        session: which session sends it (0-based).
        round: the session's round (0-based); each round is an architect then an editor request.
        role: architect or editor.
        model: the profile model name it asks for.
        messages: the whole conversation sent (system, history, new user turn).
        max_tokens: tokens it asks for.
    """

    session: int
    round: int
    role: Role
    model: str
    messages: list[Message]
    max_tokens: int


def architect_answer(session: int, rnd: int, change: str, file: str) -> str:
    """The scripted architect answer that enters the history (and the editor's request)."""
    return (
        f"1. In {file}, {change}.\n2. Keep the function's name and signature.\n"
        f"3. Add a short comment naming the change (session {session}, round {rnd + 1})."
    )


def editor_answer(file: str, rnd: int) -> str:
    """The scripted editor answer that enters the editor's history."""
    return f"```python\n# {file}: change {rnd + 1} applied\n```"


def build_trace(
    sessions: int,
    rounds: int,
    *,
    architect: str,
    editor: str,
    architect_tokens: int = 64,
    editor_tokens: int = 96,
) -> list[list[TraceRequest]]:
    """The requests of each session, in the order that session sends them.

    Raises:
        ValueError: fewer than one session or round, or a non-positive token count.
    """
    if sessions < 1 or rounds < 1 or architect_tokens < 1 or editor_tokens < 1:
        raise ValueError("sessions, rounds and token counts must be at least 1")
    return [
        _session(s, rounds, architect, editor, architect_tokens, editor_tokens)
        for s in range(sessions)
    ]


def _session(  # noqa: PLR0917
    s: int, rounds: int, architect: str, editor: str, a_tokens: int, e_tokens: int
) -> list[TraceRequest]:
    file, code, changes = _PROJECTS[s % len(_PROJECTS)]
    arch: list[Message] = [Message(role="system", content=ARCHITECT_SYSTEM)]
    edit: list[Message] = [Message(role="system", content=EDITOR_SYSTEM)]
    out: list[TraceRequest] = []
    for r in range(rounds):
        change = changes[r % len(changes)]
        if r >= len(changes):
            change += f" (pass {r // len(changes) + 1})"
        ask = f"Request {r + 1}: {change}."
        if r == 0:
            ask = f"Here is {file}:\n```python\n{code}```\n\n{ask}"
        arch.append(Message(role="user", content=ask))
        out.append(_request(s, r, "architect", architect, arch, a_tokens))
        plan = architect_answer(s, r, change, file)
        arch.append(Message(role="assistant", content=plan))
        order = f"Instructions:\n{plan}"
        if r == 0:
            order = f"The file {file}:\n```python\n{code}```\n\n{order}"
        edit.append(Message(role="user", content=order))
        out.append(_request(s, r, "editor", editor, edit, e_tokens))
        edit.append(Message(role="assistant", content=editor_answer(file, r)))
    return out


def _request(  # noqa: PLR0917
    s: int, r: int, role: Role, model: str, messages: list[Message], max_tokens: int
) -> TraceRequest:
    return TraceRequest(
        session=s, round=r, role=role, model=model, messages=list(messages),
        max_tokens=max_tokens,
    )  # fmt: skip
