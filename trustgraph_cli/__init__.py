"""The tg-* command line tools (click), embedded or over Pulsar."""
