"""The version of tscore, in one place below every layer that shows it (the CLI, the HTML pages)."""

__version__ = "0.1.0"
