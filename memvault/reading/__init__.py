"""Reading: search (retrieval, ranking, LLM rerank), listing, history and browsing."""
