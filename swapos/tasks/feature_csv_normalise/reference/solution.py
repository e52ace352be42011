import csv
import io


def read_rows(text: str) -> list[dict[str, str]]:
    """Parse CSV text with a header line into one dict per row."""
    return list(csv.DictReader(io.StringIO(text)))


def normalise_row(row: dict[str, str]) -> dict[str, str | None]:
    """Clean keys (snake_case) and values (stripped; empty -> None)."""
    result: dict[str, str | None] = {}
    for key, value in row.items():
        clean_key = "_".join(key.lower().split())
        clean_value = value.strip()
        result[clean_key] = clean_value or None
    return result
