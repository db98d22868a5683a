"""The store: memory files, git, the lock, settings, the index and its models, the LLM client, and the
two ways memories get in (ingest: verbatim; reindex: the files as they are on disk)."""
