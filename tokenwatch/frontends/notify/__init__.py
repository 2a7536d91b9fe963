"""Pushing alerts out: Alertmanager, webhooks, Slack, a command (``notify:`` / ``--notify``).

The core raises the alerts; :class:`Notifier` picks up the new ones after each event, the policy keeps
what the config wants (kinds, minimum severity, no second page for a flap), and the courier delivers
them in the background, so neither the run nor the dashboard ever waits for a receiver.
"""

from tokenwatch.frontends.notify.notifier import Notifier, start_notifier
from tokenwatch.frontends.notify.reach import unreachable_receivers

__all__ = ["Notifier", "start_notifier", "unreachable_receivers"]
