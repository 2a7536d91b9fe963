"""HTML reports of runs: one self-contained file (inline CSS, SVG charts, no network fetch).

The run itself comes from :func:`tokenwatch.runs.load_run`; this package only lays it out.
"""
