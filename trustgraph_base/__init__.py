"""Contracts shared by every service: schemas, codec, provenance, RDF, pub/sub, processors, stores."""

__version__ = "0.1.0"
