"""``swapos serve``: an OpenAI- and Ollama-compatible server over a SwapOS system
(docs/serve.md).

``app(system)`` is the ASGI app (mount it in another async app); ``python -m swapos.serve``
opens the system for a profile and serves it with Hypercorn on asyncio or trio.
"""

from __future__ import annotations

from swapos.serve.app import app as app
from swapos.serve.state import ServeSettings as ServeSettings

__all__ = ["ServeSettings", "app"]
