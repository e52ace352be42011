"""Structured output: JSON schemas as grammars, tool calls in a model's own format.

On the first floor beside ``models/`` and ``policies/``: pure functions over request data
(the schema converter is llama-cpp-python's, pure Python). ``serve/`` builds
:class:`~swapos.data.constraint.Constraint` values with it; the backends enforce them.
"""
