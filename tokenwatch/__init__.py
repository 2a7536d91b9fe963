"""tokenwatch: watch rack-scale LLM inference benchmarks live, replay them, log them headless."""

__version__ = "0.1.0"
