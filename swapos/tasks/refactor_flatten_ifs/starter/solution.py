def ticket_price(age: int) -> int:
    """Return the ticket price in euros for a visitor of the given age."""
    if age < 18:
        if age < 4:
            return 0
        else:
            return 5
    else:
        if age >= 65:
            return 6
        else:
            return 10
