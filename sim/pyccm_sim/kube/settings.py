"""The simulator's settings (fixed at start) and fault knobs (changed while it runs).

`SimSettings` is built once from flags (or from `running_kube_sim(**knobs)`) and passed
by keyword. `Faults` is the one mutable object: the knobs tests and fault drills turn
while the server runs, changed only on the server's event loop (through the admin
endpoint or the testing handle), so no lock is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


ADMIN_USER = User("admin", ("system:masters",))


@dataclass(frozen=True)
class SimSettings:
    host: str = "127.0.0.1"
    port: int = 0
    # The bearer token of the admin user (group system:masters, which RBAC never denies);
    # it also guards the /_sim/ admin endpoint.
    admin_token: str = "pyccm-sim-admin"
    # Extra bearer tokens (a static token file's rows), each mapped to a user.
    tokens: tuple[tuple[str, User], ...] = ()
    # Enforce RBAC: the ClusterRoles, Roles and bindings the simulator stores decide (as
    # kube-apiserver's --authorization-mode=RBAC). Off, every authenticated user may do
    # anything, which is all most tests need. Implied by rbac_files.
    rbac: bool = False
    # ClusterRoles, Roles and bindings created at start (other kinds in the files skipped).
    rbac_files: tuple[Path, ...] = ()
    # Changes kept for watch resumption and paginated snapshots. kube-apiserver keeps ~5
    # minutes of etcd history; 20,000 changes covers a 5,000-node cluster's busy minutes.
    history_size: int = 20_000
    # Lines a watcher may have queued before it is closed as too slow (the real server
    # closes a watcher whose buffer stays full); a full 15,000-object replay fits.
    watch_buffer: int = 100_000
    # kube-apiserver sends a bookmark to watchers that asked for them about once a minute.
    bookmark_interval: float = 60.0
    # Watches without timeoutSeconds end after this, like --min-request-timeout (1800 s).
    watch_timeout: float = 1800.0
    # A deleted namespace turns Terminating at once and its objects go this much later (the
    # namespace controller's work), so `kubectl delete -f` of a manifest that lists the
    # Namespace first still finds and deletes the objects after it, as on a cluster.
    namespace_cleanup_delay: float = 2.0
    # kube-apiserver refuses request bodies over 3 MiB.
    max_body_bytes: int = 3 * 1024 * 1024
    seed_nodes: int = 0
    seed_services: int = 0
    # ClusterIP Services seeded after the LoadBalancer ones: a large cluster's Services are
    # mostly ClusterIP, and the benchmarks measure what ignoring them costs.
    seed_cluster_ip_services: int = 0
    # Seeds uids, generateName suffixes and fault dice, so runs are reproducible.
    random_seed: int = 0
    kubeconfig_out: Path | None = None
    # Serve HTTPS with a throwaway self-signed certificate (put in the kubeconfig): kubectl
    # only sends a bearer token over TLS. The Python client is happy with plain http.
    tls: bool = False
    # With tls: accept client certificates this CA (a PEM file) signed, as kube-apiserver's
    # --client-ca-file: the user is the certificate's CN, its groups the O fields.
    client_ca_file: Path | None = None
    # HTTP basic authentication: (username, password, user). kube-apiserver dropped its
    # --basic-auth-file in 1.19, but client-go still sends a kubeconfig's username and
    # password (an authenticating proxy in front of the API server takes them).
    passwords: tuple[tuple[str, str, User], ...] = ()


@dataclass
class Faults:
    """Knobs a running simulator obeys; every field defaults to "no fault"."""

    latency: float = 0.0
    # verb -> probability that a request with that verb fails with 500 InternalError.
    error_rates: dict[str, float] = field(default_factory=dict)
    # probability that any API request is refused with 429 and Retry-After.
    throttle_rate: float = 0.0
    retry_after: int = 1
    # the next N watch requests get an ERROR event with a 410 Expired Status.
    expire_next_watches: int = 0

    def describe(self) -> dict[str, object]:
        return {
            "latency": self.latency,
            "errorRates": dict(self.error_rates),
            "throttleRate": self.throttle_rate,
            "retryAfter": self.retry_after,
            "expireNextWatches": self.expire_next_watches,
        }
