"""Collectors: sources of events behind one protocol (``async def run(self, emit)``)."""
