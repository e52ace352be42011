import csv
import io


def read_rows(text: str) -> list[dict[str, str]]:
    """Parse CSV text with a header line into one dict per row."""
    return list(csv.DictReader(io.StringIO(text)))
