def format_user(name: str, email: str) -> str:
    """Format a user for display."""
    return f"{name.strip().title()} <{email.strip().lower()}> [user]"


def format_admin(name: str, email: str) -> str:
    """Format an administrator for display."""
    return f"{name.strip().title()} <{email.strip().lower()}> [admin]"
