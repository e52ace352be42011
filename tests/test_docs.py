"""The docs hold together: citations point at pages that exist, links resolve, and the
benchmarks page stays a reference page (the dated figures live in docs/results/log/).

Pure file checks: no event loop, no model.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

EXTERNAL_DOCS = {"docs/api.md"}
"""``docs/`` paths that swapos/ cites from other projects (Ollama's API reference)."""

_DOCS_PATH = re.compile(r"(?<![\w/.])docs/[\w./-]*[\w/]")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_HEX_WORD = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_UTC_TIME = re.compile(r"\bUTC\b|\b\d{1,2}:\d{2}(:\d{2})?\b")
_ISO_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _source_files() -> list[Path]:
    return sorted((ROOT / "swapos").rglob("*.py"))


def _comments_and_strings(path: Path) -> Iterator[tuple[int, str]]:
    """Every comment and string literal (docstrings included) of a module, with its line."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    for token in tokens:
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            yield token.start[0], token.string


def _markdown_files() -> list[Path]:
    """The hand-written pages: a run's ``report.md`` is ``bench report``'s output, whose links
    point into the run's ``--out`` folder (traces, timelines), which is not kept."""
    pages = [p for p in sorted(DOCS.rglob("*.md")) if p.name != "report.md"]
    return [ROOT / "README.md", *pages]


def _prose_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a markdown file outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in _prose_lines(path):
        match = re.match(r"#{1,6}\s+(.*)", line)
        if match:
            slug = _slug(match.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_no_docstring_or_comment_cites_the_design_document() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _source_files()
        for line, text in _comments_and_strings(path)
        if re.search(r"\bDESIGN\b", text)
    ]
    assert cited == [], f"cite a docs/ page instead of DESIGN (not in the repository): {cited}"


def test_every_docs_path_cited_in_swapos_exists() -> None:
    missing = sorted(
        f"{path.relative_to(ROOT)}:{line}: {cited}"
        for path in _source_files()
        for line, text in _comments_and_strings(path)
        for cited in _DOCS_PATH.findall(text)
        if cited not in EXTERNAL_DOCS and not (ROOT / cited).exists()
    )
    assert missing == []


def test_the_docs_path_pattern_finds_citations_and_skips_urls() -> None:
    text = "see docs/timings.md, and https://prometheus.io/docs/x/ or ``docs/gpu.md``."
    assert _DOCS_PATH.findall(text) == ["docs/timings.md", "docs/gpu.md"]


def _links(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in _prose_lines(path):
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if not re.match(r"[a-z]+:", target):
                yield number, target


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for line, target in _links(page):
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            broken.append(f"{line}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{line}: {target} (no such heading)")
    assert broken == []


def test_the_anchor_of_a_heading_is_githubs() -> None:
    assert _slug("Serving: SwapOS serve vs llama_cpp.server (`serve`)") == (
        "serving-swapos-serve-vs-llama_cppserver-serve"
    )
    assert _slug("Size scaling (`--sizes`)") == "size-scaling---sizes"


def test_benchmarks_is_a_reference_page_under_400_lines() -> None:
    lines = (DOCS / "benchmarks.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 400
    dated = [
        f"{number}: {line}"
        for number, line in enumerate(lines, 1)
        if _HEX_WORD.search(line) or _UTC_TIME.search(line) or _ISO_DATE.search(line)
    ]
    assert dated == [], "dates, times and commits belong in docs/results/log/"


def test_the_reference_page_patterns_catch_what_they_are_for() -> None:
    assert _HEX_WORD.search("at commit 7cb5950 the run")
    assert not _HEX_WORD.search("1073741824 bytes, the word facade")
    assert _UTC_TIME.search("from 13:12 to 13:46") and _UTC_TIME.search("08:35 UTC")
    assert _ISO_DATE.search("on 2026-12-06")


def _figure_items(page: str) -> list[str]:
    """figures.md's bullets (with their continuation lines) and table rows."""
    items: list[str] = []
    for line in page.splitlines():
        if line.startswith("- ") or (line.startswith("| `") and not line.startswith("|---")):
            items.append(line)
        elif line.startswith("  ") and items and items[-1].startswith("- "):
            items[-1] += " " + line.strip()
    return items


def test_every_figure_links_its_results_log_entry() -> None:
    items = _figure_items((DOCS / "figures.md").read_text(encoding="utf-8"))
    assert len(items) > 10, "figures.md lists the headline figures"
    unlinked = [item for item in items if "](results/" not in item and "not measured" not in item]
    assert unlinked == []
