"""Remote models on OpenAI-compatible endpoints (``httpx``; asyncio and trio).

A profile puts a role on a remote model with ``api_base`` and ``api_model`` (docs/profiles.md,
"Remote models"); :class:`~swapos.backends.routing.RoutingBackend` sends such specs here.
"""

from swapos.backends.api.backend import ApiBackend as ApiBackend
from swapos.backends.api.model import ApiModel as ApiModel
