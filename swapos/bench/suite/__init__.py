"""``bench run``: the suite benchmark, every mode x arm on the same tasks."""
