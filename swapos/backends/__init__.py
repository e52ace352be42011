"""backends."""

import swapos.openmp  # noqa: F401  (passive OpenMP threads, before llama_cpp loads)
