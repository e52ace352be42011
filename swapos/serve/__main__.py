"""``python -m swapos.serve``."""

from __future__ import annotations

import sys

from swapos.serve.cli import main

if __name__ == "__main__":
    sys.exit(main())
