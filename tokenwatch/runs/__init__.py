"""A finished run, loaded one way for every front end: a recording through the core, or MLPerf result folders.

``summarize``, ``report`` and ``export`` all read runs through here, so they find the same nodes and the
same figures. Below the front ends (cli, report, export, tui); above recording, sources and core.

- :mod:`~tokenwatch.runs.loading`: ``load_run(path)`` -> :class:`~tokenwatch.runs.run_data.RunData`
- :mod:`~tokenwatch.runs.from_core`: the one recording -> core loop, and every figure read from the core
- :mod:`~tokenwatch.runs.result_folders`: the one discovery of LoadGen result folders, and their summary

Nothing is imported here: ``summarize`` loads only the modules its path needs.
"""
