"""Benchmarks: ``python -m swapos.bench COMMAND``, one subcommand each (:mod:`.cli`).

One package per benchmark, its subcommand in ``command.py``: ``suite`` (``bench run``, with
the arms, the scoreboard of finished triples and the progress bar, which the Ray cluster
reuses), ``swap`` (with the size scaling and the page-cache dropping of ``--cold``),
``serve``, ``soak``, ``overhead``; ``kv.py`` is ``bench kv``. Beside them, what reads any
run's output: ``results`` (results files), ``compare`` and ``stats`` (paired comparisons),
``report``, ``replay``, ``spans``, ``trace`` and ``plot`` (event logs), ``splice`` (reruns
laid over a run). See docs/benchmarks.md and docs/reports.md.
"""
