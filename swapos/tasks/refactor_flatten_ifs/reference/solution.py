def ticket_price(age: int) -> int:
    """Return the ticket price in euros for a visitor of the given age."""
    if age < 4:
        return 0
    elif age < 18:
        return 5
    elif age >= 65:
        return 6
    else:
        return 10
