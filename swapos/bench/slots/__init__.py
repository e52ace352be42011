"""``python -m swapos.bench slots``: requests side by side on one model against one at a time."""
