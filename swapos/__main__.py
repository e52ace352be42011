"""``python -m swapos``: the ``swapos`` command (:mod:`swapos.cli`)."""

from __future__ import annotations

import sys

from swapos.cli import main

if __name__ == "__main__":
    sys.exit(main())
