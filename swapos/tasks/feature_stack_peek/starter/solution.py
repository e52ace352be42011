class Stack:
    """A last-in, first-out stack."""

    def __init__(self) -> None:
        self._items: list[object] = []

    def push(self, item: object) -> None:
        """Put item on top."""
        self._items.append(item)

    def pop(self) -> object:
        """Remove and return the top item; IndexError if empty."""
        if not self._items:
            raise IndexError("pop from empty stack")
        return self._items.pop()
