"""Learning: facts from the user's words (learn, extraction, statements), episodes, summaries,
sessions, consolidation and chat."""
