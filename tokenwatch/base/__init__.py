"""Foundations: events, the clock, pacing, durations, formatting and small shared helpers."""
