"""The whole simulated cloud: the four service models, knobs, call log and counters.

One `Cloud` lives on the event loop thread of one simulator process. It owns the models
and the route table built from them, and offers the operator-side operations (seeding,
status changes, fault knobs, resets) that the `/_sim` admin API and the Python test
handle both call, so the two can never drift apart.

`reset()` rebuilds every model from the same random seed, so a reset cloud has the same
ids as a fresh one and the clouds.yaml/cloud.conf written for it stay valid; issued
tokens survive, so clients do not even notice beyond the data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from msgspec.structs import asdict

from pyccm_sim.openstack import keystone, neutron, nova, octavia
from pyccm_sim.openstack.calllog import CallLog
from pyccm_sim.openstack.errors import not_found
from pyccm_sim.openstack.members import MemberTable
from pyccm_sim.openstack.routing import Route
from pyccm_sim.openstack.seed import SeededCloud, SeedSpec, seed_cloud
from pyccm_sim.openstack.settings import Knobs, SimSettings
from pyccm_sim.openstack.store import Counters, Ids, Record, Table


class Cloud:
    def __init__(
        self, *, settings: SimSettings, knobs: Knobs | None = None, spec: SeedSpec | None = None
    ) -> None:
        self.settings = settings
        self.knobs = knobs or Knobs()
        self.spec = spec or SeedSpec()
        self.calls = CallLog()
        self._build(tokens_from=None)

    def _build(self, *, tokens_from: keystone.Keystone | None) -> None:
        ids = Ids(self.settings.random_seed)
        self.counters = Counters()
        self.keystone = keystone.Keystone(settings=self.settings, ids=ids, knobs=self.knobs)
        if tokens_from is not None:
            self.keystone.adopt_tokens(tokens_from)
        self.neutron = neutron.Neutron(
            ids=ids, counters=self.counters, knobs=self.knobs, project_id=self.keystone.project_id
        )
        self.nova = nova.Nova(
            ids=ids,
            counters=self.counters,
            knobs=self.knobs,
            neutron=self.neutron,
            project_id=self.keystone.project_id,
            user_id=self.keystone.user_id,
        )
        self.octavia = octavia.Octavia(
            ids=ids,
            counters=self.counters,
            knobs=self.knobs,
            neutron=self.neutron,
            project_id=self.keystone.project_id,
            schedule=_schedule,
        )
        self.seeded: SeededCloud = seed_cloud(nova=self.nova, neutron=self.neutron, spec=self.spec)
        # Seeding is not part of any test's story: counters start at zero.
        self.counters.clear()
        self.route_table: dict[tuple[str, str], Route] = {
            (route.method, route.path): route for route in self._routes()
        }

    def _routes(self) -> list[Route]:
        return [
            *keystone.routes(self.keystone),
            *nova.routes(self.nova, self.knobs),
            *neutron.routes(self.neutron),
            *octavia.routes(self.octavia, self.knobs),
        ]

    # -- operator-side operations (admin API and test handle) -------------------------------

    def reset(self, *, knobs: bool = True, calls: bool = True) -> None:
        """Back to the freshly seeded cloud (same ids); optionally keep knobs or the call log."""
        if knobs:
            fresh = Knobs()
            for name, value in vars(fresh).items():
                setattr(self.knobs, name, value)
        if calls:
            self.calls.clear()
        self._build(tokens_from=self.keystone)

    def inventory(self) -> dict[str, int]:
        """How many of each resource exist right now."""
        tables: list[Table | MemberTable] = [
            self.nova.servers,
            self.nova.flavors,
            self.neutron.networks,
            self.neutron.subnets,
            self.neutron.ports,
            self.neutron.floatingips,
            self.neutron.routers,
            self.neutron.security_groups,
            self.neutron.security_group_rules,
            self.octavia.loadbalancers,
            self.octavia.listeners,
            self.octavia.pools,
            self.octavia.members,
            self.octavia.healthmonitors,
        ]
        return {table.kind: len(table) for table in tables}

    def server_by_name(self, name: str) -> Record:
        server = self.nova.find_by_name(name)
        if server is None:
            raise not_found(f"no server named {name!r}")
        return server

    def add_node_server(
        self,
        index: int,
        *,
        status: str = "ACTIVE",
        floating_ip: bool = False,
        zone: str | None = None,
    ) -> Record:
        from pyccm_sim.openstack.seed import add_node_server

        return add_node_server(
            nova=self.nova,
            neutron=self.neutron,
            seeded=self.seeded,
            index=index,
            status=status,
            floating_ip=floating_ip,
            zone=zone or self.spec.zones[0],
        )

    def add_floating_ip(self, server_name: str) -> Record:
        server = self.server_by_name(server_name)
        (port, *_) = self.neutron.ports_of_device(server["id"])
        return self.neutron.create_floating_ip(
            {"floating_network_id": self.seeded.public_network_id, "port_id": port["id"]}
        )

    def snapshot(self, kind: str) -> list[Record]:
        """Copies of every row of one kind (e.g. "loadbalancer"), for assertions."""
        if kind == self.octavia.members.kind:
            return [asdict(view) for view in self.octavia.render_members(self.octavia.members)]
        tables = {
            table.kind: table
            for table in (
                self.nova.servers,
                self.neutron.ports,
                self.neutron.floatingips,
                self.neutron.routers,
                self.neutron.security_groups,
                self.neutron.security_group_rules,
                self.neutron.networks,
                self.neutron.subnets,
                self.octavia.loadbalancers,
                self.octavia.listeners,
                self.octavia.pools,
                self.octavia.healthmonitors,
            )
        }
        if kind not in tables:
            raise not_found(f"unknown resource kind {kind!r}")
        return [_copy(row) for row in tables[kind]]

    def describe(self) -> dict[str, Any]:
        return {
            "seeded": vars(self.seeded),
            "inventory": self.inventory(),
            "counters": self.counters.snapshot(),
            "knobs": self.knobs.as_dict(),
        }


def _copy(row: Record) -> Record:
    return {
        key: (
            list(value)
            if isinstance(value, list)
            else dict(value)
            if isinstance(value, dict)
            else value
        )
        for key, value in row.items()
        if not key.startswith("_")
    }


def _schedule(delay: float, callback: Callable[[], None]) -> None:
    """Run `callback` on the event loop after `delay` seconds (the Octavia state machine)."""
    asyncio.get_running_loop().call_later(delay, callback)
