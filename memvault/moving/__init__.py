"""Moving memories in and out: import, export, and sync with a git remote (merge)."""
