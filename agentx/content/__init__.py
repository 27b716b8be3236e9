"""Content synthesis: hash id -> token block, cache-bust markers, token-id or text rendering."""
