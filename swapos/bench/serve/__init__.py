"""``bench serve``: the OpenAI-compatible server replayed against a recorded trace."""
