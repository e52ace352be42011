"""What every local backend says about GPU offload: the refusal of a CPU-only build."""

from __future__ import annotations

from collections.abc import Sequence

from swapos.errors import ProfileError
from swapos.models.spec import ModelSpec
from swapos.sysinfo import GPU_INSTALL_HINT


def refuse_offload(specs: Sequence[ModelSpec], *, build: str) -> None:
    """Raise for the first spec that asks for layers on a GPU: this ``build`` has none.

    Raises:
        ProfileError: one line, naming ``models.NAME.gpu_layers`` and how to install a GPU
            build (:data:`~swapos.sysinfo.GPU_INSTALL_HINT`).
    """
    for spec in specs:
        if spec.offloaded:
            layers = '"all"' if spec.gpu_layers < 0 else str(spec.gpu_layers)
            raise ProfileError(
                f"`models.{spec.name}.gpu_layers` = {layers} asks for GPU layers, but {build}: "
                f"{GPU_INSTALL_HINT}"
            )
