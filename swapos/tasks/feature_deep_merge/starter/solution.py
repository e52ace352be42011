DEFAULT_CONFIG = {
    "server": {"host": "127.0.0.1", "port": 8080},
    "logging": {"level": "info", "handlers": {"console": True}},
}
