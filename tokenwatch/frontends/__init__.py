"""Front ends: they read snapshots and runs, and never compute statistics of their own."""
