"""memvault: long-term memory for LLM work in a git-versioned folder of markdown files."""

__version__ = "0.1.0"
