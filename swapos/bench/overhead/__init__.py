"""``bench overhead``: what the actor runtime adds per phase, on the fake backend."""
