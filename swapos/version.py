"""The SwapOS version, in a module of its own so any layer can read it without importing the
package's public API (which imports the actors)."""

__version__ = "0.1.0"
