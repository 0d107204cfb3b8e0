"""DocumentRAG: retrieve chunks by similarity, synthesise from them, explain which chunks were used."""
