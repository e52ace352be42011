"""``python -m swapos.policies.draw_tables [--check]``: the retry policy's transition tables
(:mod:`swapos.policies.retry_tables`) drawn as mermaid state diagrams into
docs/architecture.md, between the two marker lines; ``--check`` only says whether the
drawing there is up to date (exit status 1 if not). :func:`diagram` is pure."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from swapos.policies.retry_tables import (
    ATTEMPT,
    ATTEMPT_ENDS,
    ATTEMPT_START,
    DONE,
    ENTER,
    TASK,
    TASK_START,
    Transition,
)

BEGIN: Final = "<!-- retry tables: drawn by `python -m swapos.policies.draw_tables` -->"
END: Final = "<!-- end of the retry tables -->"
DOC: Final = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def machine(title: str, rows: Sequence[Transition], start: str, ends: Sequence[str]) -> list[str]:
    """One machine as a mermaid ``stateDiagram-v2`` block: a choice state is a diamond, a
    row's label ``event [guard] / action``."""
    choices = sorted({t.source for t in rows if t.event == ENTER})
    lines = [f"**{title}**", "", "```mermaid", "stateDiagram-v2"]
    lines += [f"    state {c} <<choice>>" for c in choices]
    lines.append(f"    [*] --> {start}")
    for i, t in enumerate(rows):
        guarded = any(r.guard for r in rows[:i] if (r.source, r.event) == (t.source, t.event))
        label = " ".join(
            part
            for part in (
                "" if t.event == ENTER else t.event,
                f"[{t.guard}]" if t.guard else ("[else]" if guarded else ""),
                f"/ {t.action}" if t.action else "",
            )
            if part
        )
        lines.append(f"    {t.source} --> {t.target}" + (f": {label}" if label else ""))
    lines += [f"    {end} --> [*]" for end in ends]
    return [*lines, "```"]


def diagram() -> str:
    """Both machines, as the text between the markers."""
    task = machine("The task machine", TASK, TASK_START, [DONE])
    attempt = machine("The attempt machine", ATTEMPT, ATTEMPT_START, ATTEMPT_ENDS)
    return "\n".join([*task, "", *attempt])


def drawn(doc: str) -> str:
    """``doc`` with the text between its markers replaced by :func:`diagram`.

    Raises:
        ValueError: ``doc`` lacks the markers.
    """
    head, begin, rest = doc.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"no {BEGIN!r} ... {END!r} block to draw the tables into")
    return f"{head}{BEGIN}\n{diagram()}\n{END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m swapos.policies.draw_tables")
    parser.add_argument("--check", action="store_true", help="only check the drawing")
    parser.add_argument("--doc", type=Path, default=DOC, help="the document to draw into")
    args = parser.parse_args(argv)
    doc = args.doc.read_text(encoding="utf-8")
    new = drawn(doc)
    if args.check:
        if new != doc:
            print(f"{args.doc}: the retry tables drawn there are out of date", file=sys.stderr)
            return 1
        return 0
    if new != doc:
        args.doc.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
