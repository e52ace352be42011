"""Scale-out on Ray: a suite benchmark across machines, and the server as a fleet.

The suite benchmark (``bench run --ray``), one SwapOS system per worker: ``driver`` (the
queue, the worker loops, the scoreboard), ``worker`` (what runs in each Ray actor),
``protocol`` (the messages between them), ``queue`` (the decisions of the queue),
``ray_pool`` (Ray actors; imports ``ray`` lazily), ``session`` (the entry point ``bench run
--ray`` calls), ``overhead`` (``bench ray-overhead``).

The fleet (``swapos serve --ray``), one SwapOS system per Ray Serve replica: ``fleet_front``
(the ingress: the body's model becomes Ray Serve's multiplexed id), ``fleet_replica`` (a
replica: its system, its app, its residency reports), ``fleet_bridge`` (a forwarded request
through a replica's ASGI app), ``fleet_state`` (the shared transitions and reports),
``fleet_protocol`` (their messages), ``ray_fleet`` (the Ray Serve deployments; imports
``ray`` lazily), ``fleet_cli`` (the command's flags). See docs/cluster.md.
"""
