"""Writer services: flow consumers that persist what the pipeline produces."""
