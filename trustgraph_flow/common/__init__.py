"""Wiring helpers shared by services: store options, queue names of the standard services."""
