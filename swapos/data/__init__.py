"""The bottom floor: plain data shared by every layer above it (messages, backends, the
pipeline, records). It imports nothing of SwapOS but itself; see docs/architecture.md."""
