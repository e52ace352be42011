def has_admin(users: list[dict[str, str]]) -> bool:
    """True if any user has the role "admin"."""
    return any(user["role"] == "admin" for user in users)
