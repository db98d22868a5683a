"""Where `memvault` scripts installed before issue 28 look for `main` (pyproject's entry point is now
memvault.faces.warm:main): such an install keeps working, warm path included, until it is installed
again. Nothing else imports this module."""

from memvault.faces.warm import main  # noqa: F401
