"""The manager's Prometheus metrics (exposed with every worker's in one scrape, see http.py)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

# Gauges use "livesum": one manager process writes each series, and a dead process's
# values must vanish from the scrape rather than linger.
BUS_SEQUENCE = Gauge(
    "pyccm_bus_sequence",
    "Last sequence number published per topic.",
    ["topic"],
    multiprocess_mode="livesum",
)
BUS_WORKER_LAG = Gauge(
    "pyccm_bus_worker_lag",
    "Deltas published but not yet seen by a worker (from its heartbeat).",
    ["worker", "topic"],
    multiprocess_mode="livesum",
)
INFORMER_EVENTS = Counter(
    "pyccm_informer_events_total",
    "Watch events received, by resource and type.",
    ["resource", "type"],
)
INFORMER_RELISTS = Counter(
    "pyccm_informer_relists_total", "Full relists, by resource and cause.", ["resource", "cause"]
)
CACHE_OBJECTS = Gauge(
    "pyccm_cache_objects",
    "Objects in the manager's cache.",
    ["resource"],
    multiprocess_mode="livesum",
)
WRITER_ACTIONS = Counter(
    "pyccm_writer_actions_total", "Actions applied to the API, by kind.", ["action"]
)
WRITER_FAILURES = Counter(
    "pyccm_writer_failures_total",
    "Actions that failed after retries, by kind and failure.",
    ["action", "failure"],
)
WRITER_CONFLICTS = Counter(
    "pyccm_writer_conflict_retries_total", "409 Conflicts retried by the writer.", ["action"]
)
LEADER = Gauge(
    "leader_election_master_status",
    "1 while this manager leads, else 0 (upstream name).",
    ["name"],
    multiprocess_mode="livesum",
)
LEADER_SLOWPATH = Counter(
    "leader_election_slowpath_total",
    "Renewals that had to re-read the Lease (upstream name).",
    ["name"],
)
