"""Packaged data of the local embedder: the all-MiniLM-L6-v2 tokenizer (see NOTICE.txt)."""
