def words(text: str) -> list[str]:
    """Split text into lowercase words (runs of non-space characters)."""
    return text.lower().split()
