"""When the next /metrics body is rendered: just before the next scrape is due.

A body nobody reads is not rendered (at 64 racks a Server body is ~14 MB of text and ~0.3 s of a core), so
bodies are made for scrapes. Rendered right after each scrape, the body the next scrape serves is a whole
scrape interval old (15 s under Prometheus' default). Scrapers keep a steady interval, so once two scrapes
have shown it the render is timed to finish shortly before the next one: the body served is then about a
render old, for the same one render per scrape. The first scrape waits for a body of the core as it is
(one render); until the interval is known, or when a scrape comes early, a scrape asks for a render at
once, and the next scrape gets it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

# Time kept between a render's expected end and the scrape it is for: the loop only looks every
# ``publish_every_s`` and a render's length varies with the machine's load.
MARGIN_RENDERS = 1.5


class RenderSchedule:
    """Scrapes noted as they come (any thread); ``due()`` on the loop says whether to render now."""

    def __init__(self, publish_every_s: float, clock: Callable[[], float]) -> None:
        self.publish_every_s = publish_every_s
        self._clock = clock
        self._last_scrape = math.nan
        self._render_at = math.nan  # when the render for the next scrape starts (NaN: none planned)
        self._asked = False  # a scrape came with no plan: render at once
        self.render_s = 0.0  # how long the last render took (its thread says)

    @property
    def ever_scraped(self) -> bool:
        return not math.isnan(self._last_scrape)

    def scraped(self) -> None:
        now = self._clock()
        interval = now - self._last_scrape
        self._last_scrape = now
        if interval > 0:  # two scrapes seen: the next is due one interval on
            lead = MARGIN_RENDERS * self.render_s + 2 * self.publish_every_s
            self._render_at = now + interval - lead
        else:
            self._asked = True

    def due(self) -> bool:
        return self._asked or self._clock() >= self._render_at

    def rendering(self) -> None:
        """A render for the coming scrape started: none more until the next scrape."""
        self._asked = False
        self._render_at = math.nan
