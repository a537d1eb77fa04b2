"""Octavia's flavors and availability zones (admin API), and how a load balancer create
checks them.

An operator makes a flavor profile (a provider and its `flavor_data`) and a flavor on it,
an availability zone profile (a provider and its `availability_zone_data`) and a zone on
it; a load balancer then names the flavor by id and the zone by name. The create is
checked as Octavia 2026.2's `LoadBalancersController.post` checks it, in its order: an
unknown flavor is 400 `Validation failure: Invalid flavor_id.`, a disabled one 400 `The
selected flavor is not allowed in this deployment: <id>`; the same for the zone (`Invalid
availability zone.`, `availability_zone`); then the provider: the flavor's profile's, which
a `provider` in the request must equal (else 400 `Flavor '<id>' is not compatible with
provider '<provider>'`). The zone's provider is not compared (Octavia does not either: it
only asks the load balancer's driver to validate the zone's data).

The catalogues' routes create, list (equality filters, one page), show, update and delete,
with Octavia's answers for a duplicate name (409), a missing row (404), an unknown provider
or `*_data` that is not a JSON object (400) and a row in use (409). Not modelled: RBAC (any
token may create them), paging of these lists, the drivers' checks of the data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyccm_sim.openstack.errors import ApiError, bad_request, conflict, not_found
from pyccm_sim.openstack.routing import NO_CONTENT, Reply, Req, Route, created, ok
from pyccm_sim.openstack.store import Counters, Ids, Record, Table, project_fields, select


def _missing(label: str) -> Callable[[str], ApiError]:
    return lambda row_id: not_found(f"{label} {row_id} not found.")


def _in_use(label: str, row_id: str) -> ApiError:
    return conflict(f"{label} {row_id} is in use and cannot be modified.")


def _json_object(value: Any, option: str) -> str:
    """`*_data`: a JSON object in a string (Octavia's InvalidOption otherwise)."""
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise bad_request(f"{value} is not a valid option for {option}")
    return str(value)


def _body(req: Req, root: str) -> dict[str, Any]:
    body = req.body.get(root) if isinstance(req.body, dict) else None
    if not isinstance(body, dict):
        raise bad_request(f"Invalid input for field/attribute {root}. Expected an object.")
    return body


class Catalog:
    """The four admin catalogues; `providers` are the provider names Octavia enables."""

    def __init__(self, *, ids: Ids, counters: Counters, providers: Mapping[str, str]) -> None:
        self._ids = ids
        self._providers = providers
        by_name = {"name": "name"}
        self.flavor_profiles = Table("flavorprofile", counters, indexed=by_name)
        self.flavors = Table("flavor", counters, indexed=by_name)
        self.zone_profiles = Table("availability_zone_profile", counters, indexed=by_name)
        # Zones are named, not numbered: the name is their id.
        self.zones = Table("availability_zone", counters)

    # -- the load balancer create ----------------------------------------------------------

    def provider_of(self, obj: Mapping[str, Any]) -> str:
        """The provider of a new load balancer `obj`, after Octavia's flavor and zone checks."""
        flavor_profile = None
        if (flavor_id := obj.get("flavor_id")) is not None:
            flavor = self.flavors.get(str(flavor_id))
            if flavor is None:
                raise bad_request("Validation failure: Invalid flavor_id.")
            if not flavor["enabled"]:
                raise bad_request(
                    f"The selected flavor is not allowed in this deployment: {flavor_id}"
                )
            flavor_profile = self.flavor_profiles.get(flavor["flavor_profile_id"])
        if (zone_name := obj.get("availability_zone")) is not None:
            zone = self.zones.get(str(zone_name))
            if zone is None:
                raise bad_request("Validation failure: Invalid availability zone.")
            if not zone["enabled"]:
                raise bad_request(
                    f"The selected availability_zone is not allowed in this deployment: {zone_name}"
                )
        asked = obj.get("provider")
        if flavor_id is None:
            return str(asked or "amphora")
        if flavor_profile is None:
            # Octavia's provider lookup joins the profile: a flavor without one is unknown.
            raise bad_request("Validation failure: Invalid flavor_id.")
        provider = str(flavor_profile["provider_name"])
        if asked and asked != provider:
            raise bad_request(f"Flavor '{flavor_id}' is not compatible with provider '{asked}'")
        return provider

    # -- the admin API ----------------------------------------------------------------------

    def _provider(self, name: Any) -> str:
        if name not in self._providers:
            raise bad_request(f"Provider '{name}' is not enabled.")
        return str(name)

    def _unique(self, table: Table, field: str, name: Any) -> None:
        if any(row["name"] == name for row in table.with_value("name", name)):
            raise conflict(f"A {field} of {name} already exists.")

    def create_flavor_profile(self, req: Req) -> Reply:
        body = _body(req, "flavorprofile")
        row = self.flavor_profiles.insert(
            {
                "id": self._ids.uuid(),
                "name": str(body.get("name", "")),
                "provider_name": self._provider(body.get("provider_name")),
                "flavor_data": _json_object(body.get("flavor_data"), "flavor_data"),
            }
        )
        return created({"flavorprofile": dict(row)})

    def create_flavor(self, req: Req) -> Reply:
        body = _body(req, "flavor")
        self._unique(self.flavors, "flavor", body.get("name"))
        row = self.flavors.insert(
            {
                "id": self._ids.uuid(),
                "name": str(body.get("name", "")),
                "description": str(body.get("description") or ""),
                "enabled": body.get("enabled", True) is not False,
                "flavor_profile_id": str(body.get("flavor_profile_id", "")),
            }
        )
        return created({"flavor": dict(row)})

    def create_zone_profile(self, req: Req) -> Reply:
        body = _body(req, "availability_zone_profile")
        row = self.zone_profiles.insert(
            {
                "id": self._ids.uuid(),
                "name": str(body.get("name", "")),
                "provider_name": self._provider(body.get("provider_name")),
                "availability_zone_data": _json_object(
                    body.get("availability_zone_data"), "availability_zone_data"
                ),
            }
        )
        return created({"availability_zone_profile": dict(row)})

    def create_zone(self, req: Req) -> Reply:
        body = _body(req, "availability_zone")
        name = str(body.get("name", ""))
        if self.zones.get(name) is not None:
            raise conflict(f"A availability_zone of {name} already exists.")
        profile_id = str(body.get("availability_zone_profile_id", ""))
        self.zone_profiles.require(profile_id, _missing("Availability Zone Profile"))
        row = self.zones.insert(
            {
                "id": name,
                "name": name,
                "description": str(body.get("description") or ""),
                "enabled": body.get("enabled", True) is not False,
                "availability_zone_profile_id": profile_id,
            }
        )
        return created({"availability_zone": _render(row)})

    def routes(self, prefix: str, in_use: Callable[[str, str], bool]) -> list[Route]:
        """`in_use(field, value)`: whether a load balancer has `field` == `value`."""
        flavors, zones = self.flavors.rows.values, self.zones.rows.values
        kinds: list[Kind] = [
            Kind(
                "flavorprofiles",
                "flavorprofile",
                self.flavor_profiles,
                "Flavor profile",
                self.create_flavor_profile,
                lambda i: any(f["flavor_profile_id"] == i for f in flavors()),
            ),
            Kind(
                "flavors",
                "flavor",
                self.flavors,
                "Flavor",
                self.create_flavor,
                lambda i: in_use("flavor_id", i),
            ),
            Kind(
                "availabilityzoneprofiles",
                "availability_zone_profile",
                self.zone_profiles,
                "Availability Zone Profile",
                self.create_zone_profile,
                lambda i: any(z["availability_zone_profile_id"] == i for z in zones()),
            ),
            Kind(
                "availabilityzones",
                "availability_zone",
                self.zones,
                "Availability Zone",
                self.create_zone,
                lambda i: in_use("availability_zone", i),
            ),
        ]
        table: list[Route] = []
        for kind in kinds:
            table += [
                Route("GET", f"{prefix}/{kind.path}", kind.list),
                Route("POST", f"{prefix}/{kind.path}", kind.create),
                Route("GET", f"{prefix}/{kind.path}/{{id}}", kind.show),
                Route("PUT", f"{prefix}/{kind.path}/{{id}}", kind.update),
                Route("DELETE", f"{prefix}/{kind.path}/{{id}}", kind.delete),
            ]
        return table


# Only these change on a PUT (a zone's name is its id; profiles keep their provider).
UPDATABLE = frozenset({"name", "description", "enabled"})


@dataclass(frozen=True)
class Kind:
    """One catalogue's routes: `root` is its JSON key, `used` whether a row is in use."""

    path: str
    root: str
    rows: Table
    label: str
    create: Callable[[Req], Reply]
    used: Callable[[str], bool]

    def list(self, req: Req) -> Reply:
        collection = f"{self.root}s"
        chosen = select(list(self.rows), req.query)
        rendered = project_fields([_render(row) for row in chosen], req.query)
        return ok({collection: rendered, f"{collection}_links": []})

    def show(self, req: Req) -> Reply:
        return ok({self.root: _render(self.rows.require(req.match["id"], _missing(self.label)))})

    def update(self, req: Req) -> Reply:
        row = self.rows.require(req.match["id"], _missing(self.label))
        body = _body(req, self.root)
        fixed = {"id", "name"} if self.root == "availability_zone" else {"id"}
        changes = {k: v for k, v in body.items() if k in UPDATABLE - fixed and k in row}
        self.rows.touch(row, changes)
        return ok({self.root: _render(row)})

    def delete(self, req: Req) -> Reply:
        row_id = req.match["id"]
        self.rows.require(row_id, _missing(self.label))
        if self.used(row_id):
            raise _in_use(self.label, row_id)
        self.rows.delete(row_id)
        return NO_CONTENT


def _render(row: Record) -> Record:
    """A zone is shown without its id (it has none in Octavia: the name is the key)."""
    if "availability_zone_profile_id" in row:
        return {k: v for k, v in row.items() if k != "id"}
    return dict(row)
