def has_admin(users: list[dict[str, str]]) -> bool:
    """True if any user has the role "admin"."""
    found = False
    for user in users:
        if user["role"] == "admin":
            found = True
    return found
