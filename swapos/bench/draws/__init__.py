"""``python -m swapos.bench draws``: sampled draws of one prompt in turn and side by side."""
