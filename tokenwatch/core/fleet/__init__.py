"""The core's fleet wing."""
