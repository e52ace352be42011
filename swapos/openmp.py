"""OpenMP settings for llama.cpp, applied before ``llama_cpp`` is first imported.

llama.cpp's CPU backend (built with libgomp here) keeps its idle threads spinning by
default. On a small machine where a model load, the grader or another process competes
for the cores, spinning threads starve the thread that holds the work: measured on this
2-core box with one competing process, Gemma 3 270M decoded at 0.9-2.7 tokens/s with the
default policy and 40-48 tokens/s with ``OMP_WAIT_POLICY=PASSIVE``. SwapOS overlaps loads
with generation by design, so it sets the passive policy unless the user set one.
libgomp reads it once, when it is loaded: import this module before ``llama_cpp``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
