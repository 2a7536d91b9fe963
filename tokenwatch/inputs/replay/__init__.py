"""Replay: a recording played back as a collector, with keyframes for seeking."""
