"""The librarian: documents, their pages and chunks, and stored answers; document removal cascades."""
