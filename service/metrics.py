"""Prometheus metrics: histograms of write latency and step time, counters of updates, and
gauges read from the runtime at scrape time (arrangement records and bytes per view and per
shared arrangement, subscribers, queue depths, interned strings). One registry per runtime."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from service.views import arrangements_of

if TYPE_CHECKING:
    from service.runtime import Runtime

__all__ = ["Metrics"]

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class _StateCollector(Collector):
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[GaugeMetricFamily]:
        rt = self.runtime
        records = GaugeMetricFamily(
            "difflow_arrangement_records",
            "Updates held by an arrangement",
            labels=["view", "arrangement"],
        )
        nbytes = GaugeMetricFamily(
            "difflow_arrangement_bytes",
            "Bytes held by an arrangement",
            labels=["view", "arrangement"],
        )
        subs = GaugeMetricFamily("difflow_subscribers", "Open subscriptions", labels=["view"])
        for v in list(rt.catalog.views.values()):
            for label, op in arrangements_of(v.ops):
                spine = op.spine
                records.add_metric([v.name, label], spine.records())
                nbytes.add_metric([v.name, label], spine.nbytes())
            subs.add_metric([v.name], len(v.subscribers))
        for e in list(rt.catalog.shared.entries.values()):
            spine = e.arrangement.op.spine
            records.add_metric(["", e.name], spine.records())
            nbytes.add_metric(["", e.name], spine.nbytes())
        for t in list(rt.catalog.tables.values()):
            spine = t.arrangement.op.spine
            records.add_metric(["", f"table {t.name}"], spine.records())
            nbytes.add_metric(["", f"table {t.name}"], spine.nbytes())
        yield records
        yield nbytes
        yield subs
        queue = GaugeMetricFamily("difflow_queue_depth", "Commands waiting for the engine thread")
        queue.add_metric([], rt.queue_depth)
        yield queue
        pending = GaugeMetricFamily(
            "difflow_pending_writes", "Writes waiting for their outputs to become final"
        )
        pending.add_metric([], len(rt.completions.pending()))
        yield pending
        strings = GaugeMetricFamily(
            "difflow_interned_strings",
            "Distinct strings interned since the server started (never given back)",
        )
        strings.add_metric([], len(rt.interner))
        yield strings


class Metrics:
    def __init__(self, runtime: Runtime) -> None:
        self.registry = CollectorRegistry()
        self.write_latency = Histogram(
            "difflow_write_latency_seconds",
            "From a write's arrival to its outputs being final",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.step_seconds = Histogram(
            "difflow_step_seconds",
            "Wall time of one engine step",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.updates = Counter(
            "difflow_updates", "Updates applied to tables", registry=self.registry
        )
        self.registry.register(_StateCollector(runtime))

    def render(self) -> bytes:
        return generate_latest(self.registry)
