"""The fault suite: `make faults` (`python -m bench.faults [--quick]`).

Both simulators and **two** supervisord trees (manager + node, lifecycle, service and route
workers each) sharing one Lease, the way two replicas of the pod run in a cluster. Each
tree talks to the API as its own user, so the kube simulator's request log says which
manager made every write. One drill after another injects a fault through the simulators'
knobs or a signal, waits for the system to settle (conditions with deadlines, never a
fixed sleep standing in for one), checks what the API and the cloud hold, and leaves no
Service behind for the next drill. The last drill sweeps every log, event, metric and
command line of the run for the secrets it used.

Prints one table (and writes bench/results/faults.md); exits 1 when a drill failed.
`--quick` runs the same drills smaller (fewer Services, rounds and a short soak).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import zmq

from pyccm import lifetime
from pyccm.kubeapi.errors import AlreadyExists, KubeError, NotFound
from pyccm_sim.demo import World, process_tree, simulators
from pyccm_sim.kube.runtime import write_kubeconfig
from tests.support.tree import Cloud, Kube, ingress_ips, internal_ip, node_port, supervisorctl
from tests.support.waiting import wait_for

T = TypeVar("T")
RESULTS = Path(__file__).parent / "results"
NODES = 5
CLUSTER = "demo"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager"
ADMIN_TOKEN = "pyccm-sim-admin"
# One API user per tree: the request log then names the manager behind every write.
USERS = {"a": ("ccm-a", "fault-token-a-7f3c9e"), "b": ("ccm-b", "fault-token-b-2d81aa")}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
LEASE_DURATION = 15.0
RETRY_PERIOD = 0.5  # pyccm_sim.demo.process_tree's --leader-elect-retry-period
CLOUD_QPS = 50  # per worker process: the bucket the cloud-error drill checks
EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
LB_ID = "loadbalancer.openstack.org/load-balancer-id"


class DrillFailed(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise DrillFailed(message)


# --- the system under test -------------------------------------------------------------------


@dataclass
class Tree:
    name: str
    user: str
    world: World

    @property
    def runtime(self) -> Path:
        return self.world.workdir / "run"

    def pid(self, program: str) -> int:
        text = supervisorctl(self.world, "pid", program).strip()
        return int(text) if text.isdigit() else 0

    def replaced(self, program: str, pid: int) -> bool:
        """`program` runs again, in another process than `pid`."""
        return self.pid(program) not in (0, pid)

    def pids(self) -> dict[str, int]:
        """Every supervised program's pid (0 when it is not running)."""
        programs = ("manager", "worker-node", "worker-lifecycle", "worker-route")
        found = {program: self.pid(program) for program in programs}
        found["worker-service"] = self.pid("worker-service:worker-service-0")
        return found

    def manager_up(self) -> bool:
        status = supervisorctl(self.world, "status", "manager")
        return "RUNNING" in status and self.uptime("manager") >= 2

    def uptime(self, program: str) -> float:
        pid = self.pid(program)
        if not pid:
            return 0.0
        try:
            started = Path(f"/proc/{pid}").stat().st_mtime
        except FileNotFoundError:
            return 0.0
        return time.time() - started

    def log(self) -> str:
        return (self.world.workdir / "tree.log").read_text(errors="replace")


@dataclass
class System:
    workdir: Path
    world: World
    kube: Kube
    cloud: Cloud
    trees: dict[str, Tree]
    password: str
    services: int
    rounds: int
    soak_s: float
    created: list[str] = field(default_factory=list)

    # --- the kube simulator's knobs and request log ---------------------------------------
    def admin(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.world.kube_url}/_sim/{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)

    def kube_faults(self, **faults: Any) -> None:
        self.admin("POST", "faults", faults)

    def clear_kube_faults(self) -> None:
        self.kube_faults(latency=0, errorRates={}, throttleRate=0)

    def requests(self, since: int) -> list[dict[str, Any]]:
        """The request log from record `since` (a `request_mark()`) on."""
        records: list[dict[str, Any]] = self.admin("GET", f"requests?since={since}")
        return records

    def request_mark(self) -> int:
        mark: int = self.admin("GET", "state")["requests"]
        return mark

    # --- the Lease -------------------------------------------------------------------------
    def holder(self) -> str:
        lease = reading(partial(self.kube.get, LEASE))
        return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")

    def leader(self) -> Tree:
        holder = wait_for(self.holder, timeout=60, what="a Lease holder")
        for tree in self.trees.values():
            if f"{holder} became leader" in tree.log():
                return tree
        raise DrillFailed(f"no tree's log names the holder {holder}")

    def standby_of(self, leader: Tree) -> Tree:
        return next(t for t in self.trees.values() if t is not leader)

    # --- Services --------------------------------------------------------------------------
    def create_services(self, names: list[str], annotations: dict[str, str] | None = None) -> None:
        for name in names:
            retrying(partial(self.kube.create_service, name, annotations=annotations))
            self.created.append(name)

    def delete_services(self, names: list[str]) -> None:
        for name in names:
            retrying(partial(self._delete, f"/api/v1/namespaces/default/services/{name}"))

    def label_node(self, node: str, value: str | None) -> None:
        patch = {"metadata": {"labels": {EXCLUDE_LABEL: value}}}
        retrying(partial(self.kube.patch, f"/api/v1/nodes/{node}", patch))

    def strip_finalizer(self, name: str) -> None:
        retrying(partial(self.kube.patch_service, name, {"metadata": {"finalizers": None}}))

    def writing(self, user: str) -> bool:
        """`user` patched something among the last 200 requests."""
        recent = self.requests(max(0, self.request_mark() - 200))
        return any(r["user"] == user and r["verb"] == "patch" for r in recent)

    def _delete(self, path: str) -> None:
        with suppress(NotFound):
            self.kube.delete(path)

    def live_services(self) -> list[dict[str, Any]]:
        return reading(partial(self.kube.items, "/api/v1/namespaces/default/services"))

    def converged(self, names: list[str]) -> bool:
        for name in names:
            service = reading(partial(self.kube.service, name))
            if service is None or not ingress_ips(service):
                return False
            if LB_ID not in (service["metadata"].get("annotations") or {}):
                return False
        return True

    def wait_converged(self, names: list[str], timeout: float) -> float:
        started = time.monotonic()
        wait_for(lambda: self.converged(names), timeout=timeout, what=f"{len(names)} Services")
        return time.monotonic() - started

    def cleanup(self, timeout: float = 180) -> None:
        """Every Service deleted; waits until the API and the cloud hold none of them."""
        names = [s["metadata"]["name"] for s in self.live_services()]
        self.delete_services(names)
        wait_for(lambda: not self.live_services(), timeout=timeout, what="every Service gone")
        wait_for(
            lambda: self.cloud_lbs() == {} and not self.service_fips(),
            timeout=timeout,
            what="no load balancer or floating IP left in the cloud",
        )

    # --- the cloud -------------------------------------------------------------------------
    def cloud_lbs(self) -> dict[str, int]:
        """Load balancer name → how many carry it."""
        names: dict[str, int] = {}
        for lb in self.cloud.rows("loadbalancer"):
            names[lb["name"]] = names.get(lb["name"], 0) + 1
        return names

    def service_fips(self) -> list[dict[str, Any]]:
        rows = self.cloud.rows("floatingip")
        return [f for f in rows if "Kubernetes external service" in (f.get("description") or "")]

    def nodes(self) -> list[dict[str, Any]]:
        return reading(partial(self.kube.items, "/api/v1/nodes"))

    def cloud_matches_api(self) -> str:
        """'' when the cloud holds exactly what the API says; else what differs."""
        services = [s for s in self.live_services() if s["spec"].get("type") == "LoadBalancer"]
        wanted = {f"kube_service_{CLUSTER}_default_{s['metadata']['name']}" for s in services}
        lbs = self.cloud_lbs()
        if set(lbs) != wanted or any(count != 1 for count in lbs.values()):
            return f"load balancers {sorted(lbs.items())} != Services {sorted(wanted)}"
        if len(self.service_fips()) != len(wanted):
            return f"{len(self.service_fips())} floating IPs for {len(wanted)} Services"
        backends = {
            internal_ip(n)
            for n in self.nodes()
            if (n["metadata"].get("labels") or {}).get(EXCLUDE_LABEL) is None
        }
        members = {(ip, node_port(80)) for ip in backends}
        for lb in self.cloud.rows("loadbalancer"):
            found = self.cloud.members_of(lb["id"])
            if found != members:
                return f"{lb['name']} members {sorted(found)} != {sorted(members)}"
        return ""


def reading(read: Callable[[], T], attempts: int = 20) -> T:
    """The drills' own reads ride out the faults they inject (500s, 429s)."""
    for attempt in range(attempts):
        try:
            return read()
        except KubeError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def retrying(call: Callable[[], object], attempts: int = 20) -> None:
    """The drills' own API calls ride out the faults they inject (500s, 429s)."""
    for attempt in range(attempts):
        try:
            call()
            return
        except AlreadyExists:
            return  # an earlier attempt's create went through before its answer failed
        except KubeError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2)


@contextmanager
def system(workdir: Path, *, quick: bool) -> Iterator[System]:
    token_file = workdir / "tokens.csv"
    token_file.write_text(
        "".join(f'{token},{user},uid-{user},"system:masters"\n' for user, token in USERS.values())
    )
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(workdir, nodes=NODES, latency=0, kube_args=("--token-file", str(token_file)))
        )
        trees = {}
        for name, (user, token) in USERS.items():
            tree_dir = workdir / f"tree-{name}"
            tree_dir.mkdir()
            kubeconfig = tree_dir / "kubeconfig"
            write_kubeconfig(kubeconfig, url=world.kube_url, token=token, user=user)
            tree_world = replace(world, workdir=tree_dir, kubeconfig=kubeconfig)
            stack.enter_context(process_tree(tree_world, cloud_api_qps=CLOUD_QPS))
            trees[name] = Tree(name=name, user=user, world=tree_world)
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        cloud = Cloud(world.cloud_url, world.cloud_conf.parent / "clouds.yaml")
        password = _password(world.cloud_conf)
        yield System(
            workdir=workdir,
            world=world,
            kube=kube,
            cloud=cloud,
            trees=trees,
            password=password,
            services=40 if quick else 200,
            rounds=5 if quick else 20,
            soak_s=90 if quick else 1800,
        )


def _password(cloud_conf: Path) -> str:
    for line in cloud_conf.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "password":
            return value.strip().strip('"')
    raise SystemExit(f"no password in {cloud_conf}")


# --- the drills --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    measured: str
    ok: bool = True


Drill = Callable[[System], Outcome]


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{index:03d}" for index in range(count)]


def worker_sigkill_rollout(s: System) -> Outcome:
    """SIGKILL the leader's service worker every 3 s while N Services roll out."""
    leader = s.leader()
    before_lbs, before_fips = s.cloud.created("loadbalancer"), s.cloud.created("floatingip")
    wanted = names("kill", s.services)
    started = time.monotonic()
    s.create_services(wanted)
    kills = 0
    deadline = started + 600
    program = "worker-service:worker-service-0"
    while not s.converged(wanted):
        check(time.monotonic() < deadline, "the rollout did not converge in 600 s")
        # Each worker lives 3 s from its start, then dies mid-work.
        pid = wait_for(lambda: leader.pid(program), timeout=30, what="a service worker")
        live_until = time.monotonic() + 3
        while time.monotonic() < live_until and not s.converged(wanted):
            time.sleep(0.25)
        if not s.converged(wanted):
            os.kill(pid, signal.SIGKILL)
            kills += 1
            wait_for(partial(leader.replaced, program, pid), timeout=30, what="a restart")
    took = time.monotonic() - started
    lbs = s.cloud.created("loadbalancer") - before_lbs
    fips = s.cloud.created("floatingip") - before_fips
    differs = wait_settled(s)
    check(not differs, differs)
    check(lbs == s.services, f"{lbs} load balancers created for {s.services} Services")
    check(fips == s.services, f"{fips} floating IPs created for {s.services} Services")
    s.cleanup()
    return Outcome(
        f"{s.services} Services, {kills} SIGKILLs: {lbs} LBs and {fips} FIPs created, "
        f"converged in {took:.0f} s, all deleted"
    )


def wait_settled(s: System, timeout: float = 120) -> str:
    """Wait until the cloud matches the API; '' or the last difference seen."""
    deadline = time.monotonic() + timeout
    while True:
        differs = s.cloud_matches_api()
        if not differs or time.monotonic() > deadline:
            return differs
        time.sleep(1)


@dataclass(frozen=True)
class Handover:
    seconds: float
    late_writes: int


def failover(s: System, sig: signal.Signals, *, pause: float) -> Handover:
    """Signal the leader's manager `pause` seconds into a renew cycle; time until the other
    tree holds the Lease, and the old leader's API writes after its release."""
    leader = s.leader()
    standby = s.standby_of(leader)
    wait_for(standby.manager_up, timeout=60, what="the standby manager running")
    old = s.holder()
    seen = s.request_mark()
    # A renewal lands every RETRY_PERIOD; the pause is a random point in that cycle.
    time.sleep(pause)
    os.kill(leader.pid("manager"), sig)
    signalled = time.monotonic()
    wait_for(
        lambda: s.holder() not in ("", old),
        timeout=LEASE_DURATION * 3,
        what="another manager holding the Lease",
        poll=0.02,
    )
    took = time.monotonic() - signalled
    wait_for(leader.manager_up, timeout=60, what="the old leader's manager restarted")
    return Handover(seconds=took, late_writes=late_writes(s.requests(seen), leader.user))


def late_writes(records: list[dict[str, Any]], user: str) -> int:
    """Writes by `user` after its last Lease write that gave the Lease up (the release),
    or after it stopped renewing (SIGKILL)."""
    lease_writes = [
        i
        for i, r in enumerate(records)
        if r["user"] == user
        and r["verb"] in WRITE_VERBS
        and r["path"].endswith("/leases/cloud-controller-manager")
    ]
    if not lease_writes:
        return 0
    after = records[lease_writes[-1] + 1 :]
    return sum(1 for r in after if r["user"] == user and r["verb"] in WRITE_VERBS)


def leader_sigterm(s: System) -> Outcome:
    handovers = [
        failover(s, signal.SIGTERM, pause=random.uniform(0, RETRY_PERIOD)) for _ in range(s.rounds)
    ]
    return handover_outcome(handovers, limit=5.0)


def leader_sigkill(s: System) -> Outcome:
    rounds = 1 if s.rounds < 10 else 3
    handovers = [
        failover(s, signal.SIGKILL, pause=random.uniform(0, RETRY_PERIOD)) for _ in range(rounds)
    ]
    # Nobody releases: the standby waits out the lease (15 s after the last renewal).
    return handover_outcome(
        handovers,
        limit=LEASE_DURATION + 4 * RETRY_PERIOD + 2,
        floor=LEASE_DURATION - 2 * RETRY_PERIOD - 1,
    )


def handover_outcome(handovers: list[Handover], *, limit: float, floor: float = 0.0) -> Outcome:
    times = [h.seconds for h in handovers]
    late = sum(h.late_writes for h in handovers)
    ok = max(times) <= limit and min(times) >= floor and late == 0
    return Outcome(
        f"{len(times)} handovers: min {min(times):.2f} / median {statistics.median(times):.2f} "
        f"/ max {max(times):.2f} s; old leader's writes after release: {late}",
        ok=ok,
    )


def leader_sigterm_backlog(s: System) -> Outcome:
    """SIGTERM the leader while its writer has a backlog (kube-api-qps 20, Services being
    created): the handover stays fast and the old leader stops writing at once."""
    rounds = 1 if s.rounds < 10 else 3
    handovers = []
    for round_ in range(rounds):
        wanted = names(f"backlog{round_}", 30)
        before = s.cloud.created("loadbalancer")
        s.create_services(wanted)
        leader = s.leader()
        # The writes are queued once the first results come back.
        wait_for(partial(s.writing, leader.user), timeout=60, what="the leader writing results")
        handovers.append(failover(s, signal.SIGTERM, pause=random.uniform(0, RETRY_PERIOD)))
        s.wait_converged(wanted, timeout=240)
        differs = wait_settled(s)
        check(not differs, differs)
        created = s.cloud.created("loadbalancer") - before
        check(created == len(wanted), f"{created} load balancers for {len(wanted)} Services")
        s.cleanup()
    return handover_outcome(handovers, limit=5.0)


WORKERS = ("worker-service:worker-service-0", "worker-route", "worker-node", "worker-lifecycle")


def workers_sigterm(s: System) -> Outcome:
    """SIGTERM each worker of the leader's tree while Services roll out (the service worker
    mid-sync); seconds from the signal until the process is gone."""
    leader = s.leader()
    wanted = names("sigterm", 30)
    s.create_services(wanted)
    times: dict[str, list[float]] = {}
    for round_ in range(3 if s.rounds < 10 else 10):
        for program in WORKERS:
            pid = wait_for(partial(leader.pid, program), timeout=30, what=f"{program} running")
            if program.startswith("worker-service") and round_ == 0:
                wait_for(partial(s.writing, leader.user), timeout=60, what="syncs under way")
            os.kill(pid, signal.SIGTERM)
            signalled = time.monotonic()
            wait_for(partial(gone, pid), timeout=30, what=f"{program} exiting", poll=0.01)
            times.setdefault(program.split(":")[0], []).append(time.monotonic() - signalled)
            wait_for(partial(leader.replaced, program, pid), timeout=30, what="a restart")
    s.wait_converged(wanted, timeout=240)
    differs = wait_settled(s)
    check(not differs, differs)
    s.cleanup()
    worst = max(max(t) for t in times.values())
    check(worst <= 2.0, f"a worker took {worst:.2f} s to stop: {times}")
    per = ", ".join(f"{name} {max(t):.2f}" for name, t in times.items())
    return Outcome(
        f"{sum(len(t) for t in times.values())} SIGTERMs during a 30-Service rollout; slowest "
        f"exit per worker (s): {per}; the rollout then converges"
    )


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"  # exited, not yet reaped by supervisord


def lists_fail_across_failover(s: System) -> Outcome:
    """Every LIST fails while the leader hands over: the new leader keeps renewing (no
    flapping), and no manager without the Lease lets a result reach the API."""
    leader = s.leader()
    standby = s.standby_of(leader)
    wait_for(standby.manager_up, timeout=60, what="the standby manager running")
    old = s.holder()
    s.kube_faults(errorRates={"list": 1.0})
    holders = [old]
    try:
        os.kill(leader.pid("manager"), signal.SIGTERM)
        follow_holders(s, holders, seconds=LEASE_DURATION * 2)
    finally:
        s.clear_kube_faults()
    seen = s.request_mark()
    follow_holders(s, holders, seconds=LEASE_DURATION * 1.5)
    check(len(holders) == 2, f"the Lease changed hands {len(holders) - 1} times: {holders}")
    new_leader = s.leader()
    check(new_leader is standby, "the standby did not keep the Lease")
    other_writes = sum(
        1 for r in s.requests(seen) if r["user"] == leader.user and r["verb"] in WRITE_VERBS
    )
    wanted = names("afterlists", 3)
    s.create_services(wanted)
    took = s.wait_converged(wanted, timeout=120)
    check(other_writes == 0, f"the manager without the Lease wrote {other_writes} times")
    s.cleanup()
    return Outcome(
        f"{2 * LEASE_DURATION:.0f} s of failing LISTs across a SIGTERM: 1 handover, "
        f"0 writes by the non-holder; new Services converge {took:.1f} s after"
    )


def follow_holders(s: System, holders: list[str], *, seconds: float) -> None:
    """Append every new Lease holder seen in the next `seconds` to `holders`."""
    window = time.monotonic() + seconds
    while time.monotonic() < window:
        holder = s.holder()
        if holder and holder != holders[-1]:
            holders.append(holder)
        time.sleep(0.1)


def watch_storm(s: System) -> Outcome:
    """Watch cuts (clean closes and TCP resets) and 410 storms while Services are created,
    deleted (some with the finalizer stripped first) and nodes excluded and re-included."""
    leader = s.leader()
    base = names("storm", 10)
    s.create_services(base)
    s.wait_converged(base, timeout=120)
    seen = s.request_mark()
    live = list(base)
    faults = 0
    nodes = [n["metadata"]["name"] for n in s.nodes()]
    for round_ in range(s.rounds):
        s.admin("POST", "watches/cut", {"mode": "reset" if round_ % 2 else "close"})
        s.admin("POST", "watches/expire", {"count": 3})
        faults += 2
        new = [f"storm-r{round_}-{i}" for i in range(2)]
        s.create_services(new)
        live.extend(new)
        gone = live.pop(0)
        if round_ % 2 == 0:
            # A user strips the finalizer while no watch is open, then deletes.
            s.strip_finalizer(gone)
        s.delete_services([gone])
        s.label_node(nodes[round_ % len(nodes)], None if round_ % 3 == 2 else "true")
        time.sleep(random.uniform(0.2, 1.0))
    for node in nodes:
        s.label_node(node, None)
    s.wait_converged(live, timeout=180)
    differs = wait_settled(s, timeout=180)
    check(not differs, f"after the storm: {differs}")
    relists = sum(1 for r in s.requests(seen) if r["user"] == leader.user and r["verb"] == "list")
    # One relist of Nodes and one of Services per fault, and a little slack.
    check(relists <= 2 * faults + 4, f"{relists} LISTs for {faults} watch faults")
    s.cleanup()
    return Outcome(
        f"{s.rounds} rounds of cuts (close/reset) + 410s, {s.rounds * 2} creates, {s.rounds} "
        f"deletes ({(s.rounds + 1) // 2} finalizer stripped), node exclusions: cloud = API, "
        f"members exact; {relists} LISTs for {faults} faults"
    )


def cloud_errors(s: System) -> Outcome:
    """15 % 500s and 5 % 429s with Retry-After on Octavia and Neutron."""
    rates = {"500": 0.15, "429": 0.05}
    s.cloud.set_knobs(error_rates={"load-balancer": rates, "network": rates}, retry_after_s=1)
    wanted = names("cloudfault", max(20, s.services // 4))
    before_lbs, before_fips = s.cloud.created("loadbalancer"), s.cloud.created("floatingip")
    worst = 0.0
    try:
        s.create_services(wanted)
        started = time.monotonic()
        samples: list[tuple[float, int]] = []
        while not s.converged(wanted):
            check(time.monotonic() - started < 400, "did not converge in 400 s")
            samples.append((time.monotonic(), s.cloud.mark()))
            time.sleep(1)
        took = time.monotonic() - started
        for (t0, c0), (t1, c1) in zip(samples, samples[5:], strict=False):
            worst = max(worst, (c1 - c0) / (t1 - t0))
        quiet = s.cloud.mark()
        time.sleep(20)
        steady = [c for c in s.cloud.calls(quiet) if c["service"] == "load-balancer"]
    finally:
        s.cloud.set_knobs(error_rates={})
    lbs = s.cloud.created("loadbalancer") - before_lbs
    fips = s.cloud.created("floatingip") - before_fips
    differs = wait_settled(s)
    check(not differs, differs)
    check(lbs == len(wanted) and fips == len(wanted), f"{lbs} LBs / {fips} FIPs created")
    check(not steady, f"{len(steady)} Octavia calls in 20 s of steady state")
    # Every worker process has its own bucket; four workers call the cloud here.
    check(worst <= 4 * CLOUD_QPS * 1.2, f"{worst:.0f} calls/s over 5 s")
    s.cleanup()
    return Outcome(
        f"{len(wanted)} Services converge in {took:.0f} s; {lbs} LBs, {fips} FIPs created; "
        f"peak {worst:.0f} calls/s (buckets {CLOUD_QPS}/s per worker); 0 Octavia calls "
        "in 20 s of steady state"
    )


def kube_errors(s: System) -> Outcome:
    """The API answering 10 % 500s on every verb, 5 % 429s, and 50 ms slow."""
    wanted = names("kubefault", 20)
    before = s.cloud.created("loadbalancer")
    s.kube_faults(
        latency=0.05,
        errorRates=dict.fromkeys(("get", "list", "create", "update", "patch"), 0.1),
        throttleRate=0.05,
        retryAfter=1,
    )
    try:
        s.create_services(wanted)
        took = s.wait_converged(wanted, timeout=300)
    finally:
        s.clear_kube_faults()
    differs = wait_settled(s)
    check(not differs, differs)
    created = s.cloud.created("loadbalancer") - before
    check(created == len(wanted), f"{created} load balancers for {len(wanted)} Services")
    s.cleanup()
    return Outcome(f"{len(wanted)} Services converge in {took:.0f} s; {created} LBs created")


def churn_soak(s: System) -> Outcome:
    """Services created and deleted, nodes flapping, for `soak_s`; RSS, threads and open
    fds of every process of both trees sampled every 5 s; slopes over the second half."""
    samples: dict[str, list[tuple[float, int, int, int]]] = {}
    started = time.monotonic()
    round_ = 0
    nodes = [n["metadata"]["name"] for n in s.nodes()]
    next_sample = started
    while time.monotonic() - started < s.soak_s:
        batch = [f"soak-{round_}-{i}" for i in range(3)]
        s.create_services(batch)
        s.admin("POST", "kubelet", {"node": nodes[round_ % len(nodes)], "ready": "False"})
        s.wait_converged(batch, timeout=120)
        s.admin("POST", "kubelet", {"node": nodes[round_ % len(nodes)], "ready": "True"})
        s.delete_services(batch)
        round_ += 1
        if time.monotonic() >= next_sample:
            for tree in s.trees.values():
                for program, pid in tree.pids().items():
                    sample = process_sample(pid)
                    if sample is not None:
                        samples.setdefault(f"{tree.name}/{program}", []).append(
                            (time.monotonic() - started, *sample)
                        )
            next_sample += 5
    s.cleanup()
    worst = {"rss": ("", 0.0), "threads": ("", 0.0), "fds": ("", 0.0)}
    for name, points in samples.items():
        half = points[len(points) // 2 :]
        if len(half) < 3:
            continue
        for index, key in enumerate(("rss", "threads", "fds"), start=1):
            slope = per_minute(half, index)
            if slope > worst[key][1]:
                worst[key] = (name, slope)
    rss_name, rss = worst["rss"]
    threads_name, threads = worst["threads"]
    fds_name, fds = worst["fds"]
    # Under 10 minutes the second half is warm-up (connection pools filling, caches
    # settling): the slopes are reported, and judged only on a long soak.
    judged = s.soak_s >= 600
    ok = not judged or (rss <= 2.0 and threads <= 0.5 and fds <= 0.5)
    return Outcome(
        f"{s.soak_s / 60:.1f} min, {round_} rounds; steepest second-half slopes: RSS "
        f"{rss:+.2f} MB/min ({rss_name or '-'}), threads {threads:+.2f}/min "
        f"({threads_name or '-'}), fds {fds:+.2f}/min ({fds_name or '-'})"
        + ("" if judged else " (reported, not judged: under 10 min)"),
        ok=ok,
    )


def process_sample(pid: int) -> tuple[int, int, int] | None:
    """(RSS in kB, threads, open fds) from /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    rss = int(fields["VmRSS"].split()[0])
    return rss, int(fields["Threads"]), fds


def per_minute(points: list[tuple[float, int, int, int]], index: int) -> float:
    """Least-squares slope of column `index` per minute (RSS in MB)."""
    xs = [p[0] for p in points]
    ys = [p[index] / (1024 if index == 1 else 1) for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return (
        0.0
        if den == 0
        else 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den
    )


BAD_ANNOTATIONS: dict[str, dict[str, str]] = {
    "bad-id": {LB_ID: "not-a-uuid"},
    "bad-selector": {"loadbalancer.openstack.org/node-selector": "a=b=c,,="},
    "bad-zone": {"loadbalancer.openstack.org/availability-zone": "z" * 300},
    "bad-hostname": {"loadbalancer.openstack.org/hostname": "not a hostname!"},
    "bad-int": {"loadbalancer.openstack.org/timeout-client-data": "soon"},
}


def bad_input(s: System) -> Outcome:
    """Garbage annotations, garbage node fields, malformed bus frames, an oversized object."""
    leader = s.leader()
    pids = {tree.name: tree.pids() for tree in s.trees.values()}
    for name, wanted in BAD_ANNOTATIONS.items():
        s.create_services([name], wanted)
    big = {"example.com/blob": "x" * 200_000}
    s.create_services(["oversized"], big)
    retrying(
        lambda: s.kube.client.request(
            "POST",
            "/api/v1/nodes",
            body={
                "metadata": {"name": "garbage-node", "labels": {"x": "y"}},
                "spec": {"providerID": "garbage://what", "podCIDR": "10.99.0.0/24"},
                "status": {"addresses": [{"type": "InternalIP", "address": "not-an-ip"}]},
            },
        )
    )
    counted = malformed_frames(leader)
    frames = send_garbage(leader)

    def warned() -> list[str]:
        events = s.kube.items("/api/v1/namespaces/default/events")
        named = {e["involvedObject"]["name"] for e in events if e["type"] == "Warning"}
        return [n for n in BAD_ANNOTATIONS if n not in named]

    wait_for(lambda: not warned(), timeout=120, what="a Warning event for each bad annotation")
    s.wait_converged(["oversized"], timeout=120)
    wait_for(lambda: malformed_frames(leader) - counted >= frames, timeout=30, what="drops counted")
    dropped = malformed_frames(leader) - counted
    after = {tree.name: tree.pids() for tree in s.trees.values()}
    check(after == pids, f"processes restarted: {pids} -> {after}")
    s._delete("/api/v1/nodes/garbage-node")
    s.cleanup()
    return Outcome(
        f"{len(BAD_ANNOTATIONS)} bad annotations → {len(BAD_ANNOTATIONS)} Warning events; a "
        f"node with a garbage providerID and address; {frames} malformed bus frames → "
        f"{dropped:.0f} counted drops; a 200 KB annotation; no process restarted"
    )


def send_garbage(tree: Tree, count: int = 50) -> int:
    """Frames that do not decode, sent to the manager's ROUTER as a worker would."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 1000)
    dealer.connect(f"ipc://{tree.runtime}/bus-router.sock")
    try:
        for index in range(count):
            dealer.send(b"\xff\x00garbage" * (index + 1))
    finally:
        dealer.close()
    return count


def malformed_frames(tree: Tree) -> float:
    from pyccm.exposition import pod_registry

    registry = pod_registry(str(tree.runtime / "metrics"))
    value = registry.get_sample_value("pyccm_bus_malformed_frames_total", {"side": "manager"})
    return value or 0.0


def secrets_sweep(s: System) -> Outcome:
    """The cloud password and both trees' tokens, looked for in every log and metric file of
    the run, every event in the API and the command line of every process of the trees."""
    secrets = [s.password, ADMIN_TOKEN, *(token for _, token in USERS.values())]
    where: list[str] = []
    # Files that hold a secret by design: the configs it was handed in.
    holders = {"cloud.conf", "clouds.yaml", "kubeconfig", "tokens.csv"}
    scanned = 0
    for path in s.workdir.rglob("*"):
        if not path.is_file() or path.name in holders or path.suffix == ".sock":
            continue
        data = path.read_bytes()
        scanned += 1
        where += [f"{path.relative_to(s.workdir)}" for secret in secrets if secret.encode() in data]
    events = json.dumps(s.kube.items("/api/v1/events"))
    where += ["events" for secret in secrets if secret in events]
    commands = 0
    for tree in s.trees.values():
        for program, pid in tree.pids().items():
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            commands += 1
            where += [
                f"{tree.name}/{program} cmdline" for secret in secrets if secret.encode() in line
            ]
    check(not where, f"secrets found in {sorted(set(where))}")
    return Outcome(
        f"{len(secrets)} secrets, {scanned} files (logs, metrics), every event, "
        f"{commands} command lines: 0 found"
    )


DRILLS: list[tuple[str, Drill]] = [
    ("service worker SIGKILLed 3 s after each start during a rollout", worker_sigkill_rollout),
    ("leader SIGTERM at random points of the renew cycle", leader_sigterm),
    ("leader SIGKILL", leader_sigkill),
    ("leader SIGTERM under a write backlog (kube-api-qps 20)", leader_sigterm_backlog),
    ("workers SIGTERMed mid-work: each stops within 2 s", workers_sigterm),
    ("every LIST failing across a failover", lists_fail_across_failover),
    ("watch cuts + 410 storms with creates and deletes", watch_storm),
    ("cloud 15 % 500 + 5 % 429 (Retry-After)", cloud_errors),
    ("Kubernetes API: 10 % 500 on get, list, create, update, patch + 5 % 429 + 50 ms", kube_errors),
    ("churn soak", churn_soak),
    ("bad input", bad_input),
    ("secrets sweep over the whole run", secrets_sweep),
]


@dataclass(frozen=True)
class Row:
    drill: str
    result: str
    measured: str
    seconds: float


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller drills, a 90 s soak")
    parser.add_argument("--only", default="", help="run only drills whose title has this text")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: time)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    args = parser.parse_args(argv)
    # SIGTERM and SIGHUP unwind like Ctrl-C (whatever this process inherited), so the trees
    # and simulators are stopped, not orphaned; a SIGKILL sends each of them SIGTERM.
    lifetime.stop_on_signals()
    seed = args.seed or int(time.time())
    random.seed(seed)
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-faults-"))
    rows: list[Row] = []
    started = time.monotonic()
    with system(workdir, quick=args.quick) as s:
        wait_for(lambda: s.converged([]) and s.holder(), timeout=60, what="a leader")
        for title, drill in DRILLS:
            if args.only and args.only not in title:
                continue
            print(f"… {title}", flush=True)
            began = time.monotonic()
            try:
                outcome = drill(s)
                result = "pass" if outcome.ok else "FAIL"
                measured = outcome.measured
            except Exception as error:  # a drill's failure is a row, not the end of the suite
                traceback.print_exc()
                result, measured = "FAIL", f"{type(error).__name__}: {error}"
                try:
                    s.clear_kube_faults()
                    s.cloud.set_knobs(error_rates={})
                    s.cleanup()
                except Exception:
                    traceback.print_exc()
            row = Row(title, result, measured, time.monotonic() - began)
            rows.append(row)
            print(f"  {row.result}  {row.measured}  ({row.seconds:.0f} s)", flush=True)
    failed = [row for row in rows if row.result != "pass"]
    table = render(rows, quick=args.quick, seed=seed, total=time.monotonic() - started)
    print()
    print(table)
    if not args.only:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"faults{'-quick' if args.quick else ''}.md").write_text(table)
    if failed or args.keep:
        print(f"logs: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


def render(rows: list[Row], *, quick: bool, seed: int, total: float) -> str:
    command = "make faults" + (" FAULTS_ARGS=--quick" if quick else "")
    lines = [
        f"Fault suite (`{command}`, seed {seed}): {sum(r.result == 'pass' for r in rows)} of "
        f"{len(rows)} drills pass in {total / 60:.1f} min; two trees share the Lease, "
        f"{NODES} nodes.",
        "",
        "| drill | result | measured | time |",
        "|---|---|---|---:|",
    ]
    lines += [f"| {r.drill} | {r.result} | {r.measured} | {r.seconds:.0f} s |" for r in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
