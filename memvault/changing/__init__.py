"""Changing what is stored: edit, remove, restore (manage), undo, and the review of learned facts."""
