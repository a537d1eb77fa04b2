"""The manager's Prometheus metrics (exposed with every worker's in one scrape, see http.py)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

# Gauges use "livesum": one manager process writes each series, and a dead process's
# values must vanish from the scrape rather than linger.
BUS_SEQUENCE = Gauge(
    "pyccm_bus_sequence",
    "Last sequence number published per channel (a view of a topic, e.g. route:node).",
    ["channel"],
    multiprocess_mode="livesum",
)
BUS_WORKER_LAG = Gauge(
    "pyccm_bus_worker_lag",
    "Deltas published on a channel but not yet seen by a worker (from its heartbeat).",
    ["worker", "channel"],
    multiprocess_mode="livesum",
)
# "livemax": one manager process writes each worker's series; a restarted manager starts
# a new one. An alert compares it with time(): a worker that is down or silent ages.
BUS_WORKER_LAST_SEEN = Gauge(
    "pyccm_bus_worker_last_seen_timestamp_seconds",
    "Unix time of the last message (heartbeat, hello, result) the manager got from a worker.",
    ["worker"],
    multiprocess_mode="livemax",
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
