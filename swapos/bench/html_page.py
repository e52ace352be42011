"""The frame of SwapOS's HTML reports: one self-contained page (inline style, no script,
nothing fetched), every piece of data escaped.

Builders return lists of HTML fragments; :func:`page` joins them. Text goes through
:func:`esc` (``html.escape``, quotes too) wherever it comes from: model names, task ids,
generated code and test output are data, never markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from swapos.bench.report_tables import Table

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
  max-width: 1400px; padding: 0 1.2em 3em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: .6em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ddd; padding: .2em .5em; text-align: right; white-space: nowrap; }
th { background: #f1f3f5; } td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; white-space: normal; }
.wide { overflow-x: auto; }
.facts { list-style: none; padding: 0; } .facts li { margin: .1em 0; }
.pass { color: #2b9348; font-weight: 600; } .fail { color: #bc4749; font-weight: 600; }
details { margin: .3em 0; } summary { cursor: pointer; }
details.task { border: 1px solid #ddd; border-radius: 4px; padding: .3em .6em; }
pre { background: #f6f8fa; padding: .6em; overflow-x: auto; max-height: 30em;
  white-space: pre-wrap; }
.muted { color: #666; } .note { color: #444; max-width: 60em; }
svg.timeline { width: 100%; height: auto; border: 1px solid #ddd; }
svg.timeline text { font: 11px system-ui, sans-serif; fill: #222; }
.legend span { display: inline-block; margin-right: 1.2em; }
.swatch { display: inline-block; width: .9em; height: .9em; border-radius: 2px;
  vertical-align: -.1em; margin-right: .3em; }
"""


def esc(value: object) -> str:
    """``value`` as HTML text (``<``, ``&`` and quotes escaped)."""
    return html.escape(str(value), quote=True)


def page(title: str, body: Iterable[str]) -> str:
    """A whole HTML document: ``title`` and the ``body`` fragments, with the report style."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(title)}</title>",
            f"<style>{STYLE}</style>",
            "</head><body>",
            *body,
            "</body></html>",
            "",
        ]
    )


def table(data: Table, *, text_columns: Sequence[int] = ()) -> str:
    """``data`` as an HTML table (``text_columns``: left-aligned, wrapping cells)."""
    header, rows = data
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="text">{esc(c)}</td>' if i in text_columns else f"<td>{esc(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    rows_html = "".join(body)
    return (
        f'<div class="wide"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows_html}</tbody></table></div>"
    )


def facts(lines: Iterable[str]) -> str:
    """A list of plain facts (``key: value`` lines)."""
    return '<ul class="facts">' + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>"


def section(heading: str, *parts: str, level: int = 2) -> str:
    return f"<h{level}>{esc(heading)}</h{level}>" + "".join(parts)


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def pre(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


def details(summary: str, *parts: str, css: str = "") -> str:
    """A collapsed block: ``summary`` is text; ``parts`` are HTML fragments."""
    cls = f' class="{esc(css)}"' if css else ""
    return f"<details{cls}><summary>{esc(summary)}</summary>{''.join(parts)}</details>"


def verdict(passed: bool) -> str:
    return '<span class="pass">passed</span>' if passed else '<span class="fail">failed</span>'
