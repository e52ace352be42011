"""Scale-out on Ray: a suite benchmark across machines, one SwapOS system per worker.

``driver`` (the queue, the worker loops, the scoreboard), ``worker`` (what runs in each Ray
actor), ``protocol`` (the messages between them), ``queue`` (the decisions of the queue),
``ray_pool`` (the only module that imports ``ray``, lazily), ``session`` (the entry point
``bench run --ray`` calls), ``overhead`` (``bench ray-overhead``). See docs/cluster.md.
"""
