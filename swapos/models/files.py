"""A profile made from model files: ``swapos serve a.gguf b.gguf`` and ``--models-dir DIR``.

Each file is one model, named by its file name without ``.gguf`` (a split model by its first
part's name without ``-00001-of-0000N``: llama.cpp reads the other parts beside it). Roles do
not matter for serving, so the profile has none; every model gets the profile defaults, and
the budget is ``"auto"`` (half of the memory available) unless a ``budget`` is given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from swapos.errors import ProfileError
from swapos.models.profile import ModelConfig, Profile

SUFFIX = ".gguf"
_SPLIT = re.compile(r"^(?P<name>.+)-(?P<part>\d{5})-of-(?P<parts>\d{5})$")
_NOT_MODELS = ("mmproj",)
FILE_CONTEXT_CAP = 131072
"""A served file's ``n_ctx`` cap: in effect the length its GGUF says it was trained for (the
cap is bounded by that, ``models/resolve.py``); it loads with 4096 and grows as requests need
it, as far as the budget holds (``policies/contexts.py``)."""
"""File name prefixes of GGUF files that are not language models (vision projectors)."""


def model_name(path: Path) -> str:
    """The model name of a GGUF file: its name without ``.gguf`` (and without the
    ``-00001-of-0000N`` of a split model's first part)."""
    stem = path.name.removesuffix(SUFFIX)
    split = _SPLIT.match(stem)
    return split.group("name") if split else stem


def _served(path: Path) -> bool:
    """Whether a file of a models folder is served: a GGUF model, or a split model's first
    part (not a later part, not a vision projector)."""
    if not path.name.endswith(SUFFIX) or path.name.startswith(_NOT_MODELS):
        return False
    split = _SPLIT.match(path.name.removesuffix(SUFFIX))
    return split is None or int(split.group("part")) == 1


def models_in(directory: Path) -> list[Path]:
    """The GGUF models of ``directory`` (not its subfolders), sorted by name.

    Every entry named as a model is one, whatever it is: a link to a model elsewhere is
    served under the link's name, and a dangling link, a link loop, a folder or a FIFO named
    ``*.gguf`` is refused by name when its header is checked (``read_gguf``), never left out
    without a word.

    Raises:
        ProfileError: it is not a readable folder, or holds no ``.gguf`` model.
    """
    try:
        found = sorted(p for p in directory.iterdir() if _served(p))
    except OSError as exc:
        raise ProfileError(
            f"--models-dir {directory}: {exc.strerror or exc}; give a folder of .gguf files"
        ) from exc
    if not found:
        raise ProfileError(f"--models-dir {directory}: no .gguf model in it")
    return found


def files_profile(
    files: Sequence[Path], *, budget: int | str = "auto", name: str = "files"
) -> Profile:
    """A profile serving ``files``, one model each, named by :func:`model_name`.

    Raises:
        ProfileError: no file, a file that is not ``.gguf``, or two files of one name.
    """
    if not files:
        raise ProfileError("no model file given: name .gguf files or a --models-dir")
    models: dict[str, ModelConfig] = {}
    paths: dict[str, Path] = {}
    for file in files:
        if not file.name.endswith(SUFFIX):
            raise ProfileError(f"{file}: not a .gguf model file")
        key = model_name(file)
        if key in paths:
            raise ProfileError(
                f"{paths[key]} and {file} would both be served as {key!r}: rename one"
            )
        paths[key] = file
        # absolute, not resolved: a link keeps its own name in every message (and resolving
        # a link loop raises)
        models[key] = ModelConfig(path=str(file.absolute()), n_ctx=FILE_CONTEXT_CAP)
    return Profile(name=name, budget=budget, models=models)
