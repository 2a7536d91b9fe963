"""The core's causes wing."""
