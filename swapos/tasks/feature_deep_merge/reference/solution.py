DEFAULT_CONFIG = {
    "server": {"host": "127.0.0.1", "port": 8080},
    "logging": {"level": "info", "handlers": {"console": True}},
}


def deep_merge(base: dict, override: dict) -> dict:
    """Return base updated by override, merging nested dicts recursively."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
