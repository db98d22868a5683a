"""Where `memvault` scripts installed before issue 28 look for `main` (pyproject's entry point is now
memvault.faces.cli:main): such an install keeps working until it is installed again. Nothing else
imports this module."""

from memvault.faces.cli import main  # noqa: F401
