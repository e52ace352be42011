"""``bench decode``: the cost of a verification batch per model, the acceptance of each
drafting rule replayed on recorded outputs, and drafted against plain decoding."""
