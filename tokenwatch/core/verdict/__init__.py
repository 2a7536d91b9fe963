"""The core's verdict wing."""
