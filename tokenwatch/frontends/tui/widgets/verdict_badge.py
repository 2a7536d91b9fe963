"""The header's verdict badge: ``PROJECTED VALID 1,094k ±0.4 %`` (``FINAL ...`` once the run has ended,
``DECIDED INVALID`` once a state makes VALID impossible)."""

from __future__ import annotations

from textual.widgets import Static

from tokenwatch.base.formatting import group, projection, verdict_word
from tokenwatch.core.snapshot import RackSnapshot
from tokenwatch.mlperf.warm_up import WARMING_UP


def badge_text(snap: RackSnapshot) -> str:
    """What the badge says for ``snap`` ("" when the run has no verdict)."""
    verdict = snap.verdict
    if verdict is None or not snap.run.nodes:
        return ""
    fc = verdict.forecast
    band = fc.tokens_per_s
    valid = fc.valid
    final = snap.summary.verdict if snap.ended and snap.summary is not None else None
    if final is not None:
        valid = final.valid
    exact = band is not None and bool(fc.decided) and band.low == band.high == band.value
    if snap.ended or exact:  # the final figure, or LoadGen's own: exact, no band
        figure = group(band.value) if band is not None else "—"
    elif fc.stale:  # the data stopped: nothing extrapolated from its last figures
        return f"PROJECTED {verdict_word(valid)} stale"
    elif fc.warming_up:  # no figure yet: the pace still climbs (a decided verdict says so all the same)
        if fc.decided:
            return f"DECIDED {verdict_word(valid)} {WARMING_UP}"
        return (
            f"PROJECTED {verdict_word(valid)} {WARMING_UP}" if valid is False else f"PROJECTED {WARMING_UP}"
        )
    else:
        figure = projection(band.value, band.low, band.high) if band is not None else "—"
    stage = "FINAL" if snap.ended else "DECIDED" if fc.decided else "PROJECTED"
    return f"{stage} {verdict_word(valid)} {figure}"


class VerdictBadge(Static):
    """Coloured by the verdict: success VALID, error INVALID, warning UNDECIDED (and the word says it)."""

    DEFAULT_CSS = """
    VerdictBadge {
        width: auto;
        max-width: 40;
        padding: 0 1;
        margin-left: 1;
        text-style: bold;
        color: $background;
        background: $warning;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    VerdictBadge.-valid { background: $success; }
    VerdictBadge.-invalid { background: $error; color: $text; }
    VerdictBadge.-none { display: none; }
    """

    _shown = ""

    def show(self, snap: RackSnapshot) -> None:
        text = badge_text(snap)
        self.set_class(not text, "-none")
        self.set_class(" VALID " in f"{text} ", "-valid")
        self.set_class(" INVALID " in f"{text} ", "-invalid")
        if text != self._shown:  # most refreshes say the same
            self._shown = text
            self.update(text)
