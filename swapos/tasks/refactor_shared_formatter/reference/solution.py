def format_person(name: str, email: str, role: str) -> str:
    """Format a person with a role for display."""
    return f"{name.strip().title()} <{email.strip().lower()}> [{role}]"


def format_user(name: str, email: str) -> str:
    """Format a user for display."""
    return format_person(name, email, "user")


def format_admin(name: str, email: str) -> str:
    """Format an administrator for display."""
    return format_person(name, email, "admin")
