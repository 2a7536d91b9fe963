"""The deterministic rack simulator: profiles, faults, the seeded event generator and its collector."""

DEFAULT_PROFILE = "gb300-nvl72"
