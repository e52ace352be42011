"""``python -m swapos.bench soak-slots``: many streamed clients on one model's slots for minutes."""
