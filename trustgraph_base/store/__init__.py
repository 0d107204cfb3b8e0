"""Storage protocols and their backends (``sqlite`` embedded, ``cassandra`` distributed), chosen by name."""
