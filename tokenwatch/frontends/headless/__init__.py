"""Plain-text front ends: the headless logger and the summary table."""
