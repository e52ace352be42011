"""The passes: heuristics over a task's brief and a model's answers that the conducting core
runs when a profile names them (``pipeline.passes``; the core runs with none).

Each pass adds to the core through the small interfaces of :mod:`swapos.pipeline.hooks`
(a brief reader, a candidate repair, a pre-grade check), and its module's docstring carries
its fixtures (the tests that pin it) and the measurement that earned it its place in the
default profile:

- ``examples`` (:mod:`~swapos.passes.examples`): the examples of the docstring or brief,
  checked against each candidate before its grade;
- ``open_asked`` (:mod:`~swapos.passes.opening`): the first answer of a task whose brief asks
  to add a definition is opened with it, asked as an edit and spliced into the starter;
- ``restore_dropped`` (:mod:`~swapos.passes.restore`): what an answer dropped and still uses
  is put back;
- ``precheck_defects`` (:mod:`~swapos.passes.defects`): a candidate that does not parse, or
  lacks a name the brief asks to add, is held before its grade.

The core applies the passes in the order of :data:`PASSES` whatever order a profile names
them in (an edit is spliced before what it dropped is put back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, get_args

from swapos.models.profile import PassName
from swapos.passes.defects import PrecheckDefects
from swapos.passes.examples import ExamplesReader
from swapos.passes.opening import OpenAsked
from swapos.passes.restore import RestoreDropped
from swapos.pipeline.hooks import Passes, combined

_OPEN = OpenAsked()
PASSES: Final[Mapping[PassName, Passes]] = {
    "examples": Passes(names=("examples",), readers=(ExamplesReader(),)),
    "open_asked": Passes(names=("open_asked",), readers=(_OPEN,), repairs=(_OPEN,)),
    "restore_dropped": Passes(names=("restore_dropped",), repairs=(RestoreDropped(),)),
    "precheck_defects": Passes(names=("precheck_defects",), checks=(PrecheckDefects(),)),
}
"""Every pass by the name a profile gives it, in the order the core applies them."""
assert tuple(PASSES) == get_args(PassName)


def passes_named(names: Sequence[PassName]) -> Passes:
    """The passes ``names`` names, as one set (:data:`PASSES`' order)."""
    return combined([PASSES[name] for name in PASSES if name in names])
