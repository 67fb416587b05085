"""``BrokerStats``' windows as VIEW_BROKER_STATS_DATA reads them: the minute is the last 7
ten-second samples, the hour gains a snapshot every 60 samples (10 minutes), the day every
360 (an hour); a statistic first counted between two samples was 0 at the first of them."""

from __future__ import annotations

from broker.stats import HOUR_EVERY, MINUTE_SAMPLES, TOPIC_PUT_NUMS, BrokerStats


def test_the_minute_slides_and_the_hour_fills_every_ten_minutes() -> None:
    stats = BrokerStats("DefaultCluster")
    assert stats.view(TOPIC_PUT_NUMS, "T") is None  # nothing counted, no statistic
    for _ in range(HOUR_EVERY):
        stats.on_put(2, "T", 20)  # one request of two messages per sample
        stats.sample()
    data = stats.view(TOPIC_PUT_NUMS, "T")
    assert data is not None
    # The minute: 7 snapshots, 6 intervals of two messages each, one call per interval.
    assert (data.minute.sum, data.minute.avgpt) == (2 * (MINUTE_SAMPLES - 1), 2.0)
    # The hour: from 0 before the first sample to the 60th sample.
    assert data.hour.sum == 2 * HOUR_EVERY
    assert data.day.sum == 0  # its first snapshot after the start comes at sample 360
    assert data.sum_24h() == 2 * HOUR_EVERY
