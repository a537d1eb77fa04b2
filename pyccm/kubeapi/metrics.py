"""Metrics of the Kubernetes side: informers and the writer."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

INFORMER_EVENTS = Counter(
    "pyccm_informer_events_total",
    "Watch events received, by resource and type.",
    ["resource", "type"],
)
INFORMER_RELISTS = Counter(
    "pyccm_informer_relists_total", "Full lists, by resource and cause.", ["resource", "cause"]
)
# "livesum": one process owns each series; a dead process's value must leave the scrape.
CACHE_OBJECTS = Gauge(
    "pyccm_cache_objects",
    "Objects in the cache, by resource.",
    ["resource"],
    multiprocess_mode="livesum",
)
WATCH_LIVE = Gauge(
    "pyccm_informer_watch_live",
    "1 while the resource's watch is open, 0 while it is reconnecting.",
    ["resource"],
    multiprocess_mode="livesum",
)
WRITER_ACTIONS = Counter(
    "pyccm_writer_actions_total",
    "Actions applied to the API, by action and outcome.",
    ["action", "outcome"],
)
WRITER_CONFLICTS = Counter(
    "pyccm_writer_conflict_retries_total",
    "409 Conflicts the writer retried, by action.",
    ["action"],
)
