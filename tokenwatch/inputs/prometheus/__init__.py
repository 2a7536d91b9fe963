"""Prometheus as an input: one rack's series, or a fleet's rack figures computed by the server."""
