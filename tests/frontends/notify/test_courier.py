"""The courier on its own: a full outbox drops its oldest alerts and says how many in its one warning;
a receiver back after an outage is news again (a later outage warns again)."""

from __future__ import annotations

from tests.conftest import wait_until_async
from tests.frontends.notify.notify_support import closed_url, receiving, stale_edge
from tokenwatch.frontends.notify.delivery import Courier
from tokenwatch.frontends.notify.notification import Notification
from tokenwatch.frontends.notify.receivers import runtime_receivers
from tokenwatch.inputs.notify_config import NotifyConfig, ReceiverConfig


def stale(n: int) -> Notification:
    return stale_edge(f"node{n:02d}", float(n))


async def test_a_full_outbox_drops_its_oldest_and_the_one_warning_counts_them() -> None:
    config = NotifyConfig(
        to=[ReceiverConfig(webhook=closed_url())], queue=2, retry_for_s=0.3, group_wait_s=0.0, timeout_s=1.0
    )
    warnings: list[str] = []
    courier = Courier(config, runtime_receivers(config), warnings.append)
    courier.put([stale(n) for n in range(1, 6)])  # five at once into room for two
    (box,) = courier.boxes
    assert [note.node for note in box.pending] == ["node04", "node05"]  # the newest kept
    await wait_until_async(lambda: bool(warnings), "the outage's warning")
    await courier.close(wait_s=0.5)
    (warning,) = warnings
    assert "5 alerts not delivered" in warning  # three overflowed, two given up on
    assert "cannot connect" in warning


async def test_after_a_receiver_recovers_a_later_outage_warns_again() -> None:
    with receiving("fail") as hook:
        config = NotifyConfig(
            to=[ReceiverConfig(webhook=hook.url)], retry_for_s=0.3, group_wait_s=0.0, timeout_s=5.0
        )
        warnings: list[str] = []
        courier = Courier(config, runtime_receivers(config), warnings.append)
        courier.put([stale(1)])
        await wait_until_async(lambda: len(warnings) == 1, "the first outage's warning")
        courier.put([stale(2)])  # still failing: the same outage, no second warning
        await wait_until_async(lambda: courier.boxes[0].dropped == 2, "the second alert given up on")
        hook.mode = "ok"
        courier.put([stale(3)])
        await wait_until_async(lambda: courier.boxes[0].delivered == 1, "delivered once it is back")
        hook.mode = "fail"
        courier.put([stale(4)])
        await wait_until_async(lambda: len(warnings) == 2, "the second outage's warning")
        await courier.close(wait_s=0.5)
        assert [b["node"] for b in hook.bodies()] == ["node03"]
    assert all("HTTP 500" in w for w in warnings)
