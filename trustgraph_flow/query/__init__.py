"""Query services: request/response access to the stores."""
