def validate_email(email: str) -> str:
    """Return email trimmed and lowercased; ValueError if it is not a plausible address."""
    email = email.strip().lower()
    if "@" not in email or email.startswith("@") or email.endswith("@"):
        raise ValueError(f"invalid email: {email!r}")
    return email


def create_user(name: str, email: str) -> dict[str, str]:
    """Create a user record; the email is stored trimmed and lowercased."""
    return {"name": name.strip(), "email": validate_email(email)}


def change_email(user: dict[str, str], email: str) -> dict[str, str]:
    """Return a copy of user with a new email, trimmed and lowercased."""
    return {**user, "email": validate_email(email)}
