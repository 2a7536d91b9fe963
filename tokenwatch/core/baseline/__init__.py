"""The core's baseline wing."""
