"""``bench soak``: a long run that watches memory and latency for drift."""
