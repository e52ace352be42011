"""Helpers for sending records to the API in batches."""
