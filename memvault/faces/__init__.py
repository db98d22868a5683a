"""The faces: the CLI, `memvault serve`, `memvault mcp`, and what only they use (completion, terminal)."""
