"""Cold runs: an evicted model's file leaves the OS page cache too.

``open_system(cold=True)`` (the benchmarks' ``--cold``) models a machine whose RAM cannot
also cache the files of evicted models: once the Loader has closed a model, its file's
pages are dropped (``posix_fadvise(DONTNEED)``, by the backend), so the next load of that
model reads from disk. Without it, the page cache is left to the OS.
"""

from __future__ import annotations

from swapos.backends.base import ModelBackend
from swapos.models.spec import ModelSpec


class PageCache:
    """What happens to an evicted model's file in the page cache."""

    def __init__(self, backend: ModelBackend, *, cold: bool) -> None:
        self._backend = backend
        self.cold = cold

    async def evicted(self, spec: ModelSpec) -> None:
        """``spec``'s model was just closed: in a cold run, drop its file's pages."""
        if self.cold:
            await self._backend.drop_page_cache(spec)
