"""MLPerf Inference rules, LoadGen's verdict and the forecast of where a run will land.

A bottom layer (stdlib, numpy and tokenwatch.base.events only; an import-linter contract keeps it so):
``rules`` (the rules as data, with citations), ``early_stopping`` (LoadGen's binomial test),
``figures`` / ``verdict`` (LoadGen's final judgement), ``pace`` / ``throughput_forecast`` /
``rules_forecast`` / ``forecast`` (the projection every interval).
"""
