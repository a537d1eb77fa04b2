"""The Octavia and Neutron REST calls of the load-balancer code, table-driven.

Each collection the load balancers touch is one `Resource` row below (its path, its JSON
keys, the struct an item decodes to, the operations it allows, the statuses a create and a
delete answer, whether its writes wait on the load balancer's provisioning status), and
`Api` has one generic `find` (list) / `get` / `create` / `update` / `delete` / `set_tags`. Each call
is one HTTP request through the process's `OpenStackClient` (throttled, measured as
`<resource>_<op>`, errors mapped), so the call sequence of a sync reads like upstream's
(docs/upstream.md#call-sequences) and can be compared with it call for call. openstacksdk
has no method for the batch member update; here it is a plain
`PUT /lbaas/pools/{id}/members` (`replace_members`, `add_members`). A read of a missing
object is `CloudNotFound` (`get_or_none`: None); a delete of a missing one is done
already.

Request bodies have a size limit (oslo.middleware's `max_request_body_size`, 114,688 bytes
by default, answered 413 before anything is done). `BodyLimit` learns it from the first 413
so that later bodies over it are refused here (`BodyTooLarge`) without a call; the callers
split what they send (`batch.py`, and the member-less create in `octavia.py`).

Octavia answers 409 to any write while the load balancer is PENDING_*, in two wordings:
"Load Balancer <id> is immutable and cannot be updated." for a child (listener, pool,
member, monitor) and "Invalid state PENDING_UPDATE of loadbalancer resource <id>" for a
PUT or DELETE of the load balancer itself. `Api` turns both into `RetryAfter` (upstream
would have blocked a thread polling for ACTIVE; the delay grows per load balancer with the
transport's `Backoff`), so a sync stops where it is and the next one carries on from the
cloud's state. Any other 409 (a duplicate listener port, ...) is a
real conflict and fails the sync.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, cast

import msgspec

from pyccm.pacing import Backoff
from pyccm.protocol.decoding import decode_json
from pyccm.provider.errors import CloudConflict, CloudError, CloudNotFound, RetryAfter
from pyccm.provider.openstack.common.ports import list_ports
from pyccm.provider.openstack.common.resources import Network, Port
from pyccm.provider.openstack.loadbalancer.resources import (
    FloatingIp,
    HealthMonitor,
    Listener,
    LoadBalancer,
    Member,
    MemberKey,
    Pool,
    Ref,
    SecurityGroup,
    SecurityGroupRule,
    Subnet,
)
from pyccm.provider.openstack.transport.client import OpenStackClient, Params
from pyccm.provider.openstack.transport.connection import ServiceType

log = logging.getLogger(__name__)

Body = dict[str, Any]
S = TypeVar("S", bound=msgspec.Struct)
# Listed by load balancer: an item that names the load balancers it belongs to.
OfLb = TypeVar("OfLb", Listener, Pool)
Op = Literal["list", "read", "create", "update", "delete", "tags"]
ACTIVE = "ACTIVE"
ERROR = "ERROR"
PENDING_DELETE = "PENDING_DELETE"
# Waiting for ACTIVE without holding a thread: the first retry comes after 1 s (upstream's
# first poll), then 1.5x per try up to 30 s, so a 60 s amphora boot costs ~9 cheap GETs.
FIRST_RETRY = 1.0
RETRY_FACTOR = 1.5
MAX_RETRY = 30.0
# oslo.middleware's default `max_request_body_size` (Octavia's and Neutron's stock limit).
STOCK_BODY_LIMIT = 114_688
# The bytes of a batch member update's body around its list: `{"members":` and `}`.
ENVELOPE = len(b'{"members":}')


_BUSY = re.compile(r"is immutable|Invalid state PENDING_")


def is_busy(conflict: CloudConflict) -> bool:
    """A 409 that only means "the load balancer is PENDING_*, try again later"."""
    return _BUSY.search(str(conflict)) is not None


def is_pending(lb: LoadBalancer) -> bool:
    return lb.provisioning_status.startswith("PENDING")


class Wanted(Protocol):
    """The members a pool should have (`desired.PoolSpec`)."""

    @property
    def member_count(self) -> int: ...

    def has(self, member: MemberKey | Member) -> bool: ...


class BodyTooLarge(CloudError):
    """A request body over the cloud's limit: answered 413, or refused here because an
    earlier 413 taught the limit. Nothing was done; the caller sends less per call."""

    def __init__(self, message: str, *, size: int) -> None:
        super().__init__(message, status=413, retryable=False)
        self.size = size


class BodyLimit:
    """The largest request body the cloud takes, as learned from its 413s (None: no 413
    seen yet, so anything is tried). Process-wide; a raised limit is seen after a restart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limit: int | None = None

    @property
    def bytes(self) -> int | None:
        with self._lock:
            return self._limit

    def refused(self, size: int) -> None:
        """A body of `size` bytes got 413: assume the stock limit, or half of `size` when
        that was already under it, so that the next split fits."""
        guess = STOCK_BODY_LIMIT if size > STOCK_BODY_LIMIT else size // 2
        with self._lock:
            if self._limit is None or guess < self._limit:
                log.warning(
                    "the cloud refused a %d-byte request body (413): sending at most %d bytes "
                    "per call from now on (raise [oslo_middleware] max_request_body_size)",
                    size,
                    guess,
                )
                self._limit = guess

    def check(self, body: Body, request: str) -> None:
        """Raise `BodyTooLarge` when `body` is over the learned limit."""
        if self.bytes is not None:
            self.check_size(body_size(body), request)

    def check_size(self, size: int, request: str) -> None:
        """Raise `BodyTooLarge` when a body of `size` bytes is over the learned limit."""
        limit = self.bytes
        if limit is not None and size > limit:
            raise BodyTooLarge(
                f"{request}: the request body ({size} bytes) is over the cloud's limit "
                f"({limit} bytes, learned from a 413)",
                size=size,
            )


def body_size(body: Body) -> int:
    """The bytes of `body` as the HTTP client sends it (msgspec's compact JSON)."""
    return len(msgspec.json.encode(body))


@dataclass(frozen=True)
class Resource(Generic[S]):
    """One Octavia or Neutron collection, as the generic calls of `Api` use it."""

    name: str  # the metric's `<resource>` (`loadbalancer` -> `loadbalancer_get`)
    service: ServiceType
    path: str  # the collection; `{parent}` is the pool of a member
    key: str  # one item's JSON key (`{"loadbalancer": {...}}`)
    collection: str  # a list's JSON key (`{"loadbalancers": [...]}`)
    item: type[S]
    allows: frozenset[Op]
    created: tuple[int, ...] = (201,)
    deleted: tuple[int, ...] = (204,)
    # Octavia: a write is refused (409) while the load balancer is PENDING_*; `Api` turns
    # that into `RetryAfter` for the load balancer named by the call's `lb_id`.
    waits: bool = False
    # Bodies that can outgrow the cloud's limit: checked against the learned one first,
    # and a 413 teaches it (`BodyLimit`).
    sized: bool = False

    def url(self, ident: str = "", *, parent: str = "") -> str:
        base = self.path.format(parent=parent)
        return f"{base}/{ident}" if ident else base

    def decode(self, content: bytes, request: str) -> S:
        """The item of a `{key: item}` answer."""
        try:
            envelope = decode_json(content, _envelope_of(self.key, self.item))
        except msgspec.DecodeError as exc:
            raise CloudError(f"{request}: unexpected response body ({exc})") from exc
        return cast(S, getattr(envelope, self.key))


@functools.cache
def _envelope_of(key: str, item: type[msgspec.Struct]) -> type[Any]:
    """`{key: item}` as a msgspec Struct, built once per resource."""
    return msgspec.defstruct(f"{key}_envelope", [(key, item)], frozen=True)


# Columns: name, service, path, key, collection, item, allows (then the non-defaults).
_OCTAVIA: frozenset[Op] = frozenset({"list", "read", "create", "update", "delete"})
LOADBALANCERS = Resource(
    "loadbalancer", "load-balancer", "/lbaas/loadbalancers", "loadbalancer", "loadbalancers",
    LoadBalancer, _OCTAVIA, created=(201, 202), deleted=(202, 204), waits=True, sized=True,
)  # fmt: skip
LISTENERS = Resource(
    "listener", "load-balancer", "/lbaas/listeners", "listener", "listeners",
    Listener, _OCTAVIA, deleted=(202, 204), waits=True,
)  # fmt: skip
POOLS = Resource(
    "pool", "load-balancer", "/lbaas/pools", "pool", "pools",
    Pool, _OCTAVIA, deleted=(202, 204), waits=True,
)  # fmt: skip
MEMBERS = Resource(
    "member", "load-balancer", "/lbaas/pools/{parent}/members", "member", "members",
    Member, frozenset({"list", "create", "delete"}), deleted=(202, 204), waits=True,
)  # fmt: skip
HEALTH_MONITORS = Resource(
    "healthmonitor", "load-balancer", "/lbaas/healthmonitors", "healthmonitor", "healthmonitors",
    HealthMonitor, frozenset({"read", "create", "update", "delete"}), deleted=(202, 204),
    waits=True,
)  # fmt: skip
FLOATING_IPS = Resource(
    "floatingip", "network", "/floatingips", "floatingip", "floatingips",
    FloatingIp, frozenset({"list", "create", "update", "delete", "tags"}),
)  # fmt: skip
SECURITY_GROUPS = Resource(
    "security_group", "network", "/security-groups", "security_group", "security_groups",
    SecurityGroup, frozenset({"list", "create", "delete", "tags"}),
)  # fmt: skip
SECURITY_GROUP_RULES = Resource(
    "security_group_rule", "network", "/security-group-rules", "security_group_rule",
    "security_group_rules", SecurityGroupRule, frozenset({"list", "create", "delete"}),
)  # fmt: skip
NETWORKS = Resource(
    "network", "network", "/networks", "network", "networks", Network, frozenset({"list"})
)  # fmt: skip
SUBNETS = Resource(
    "subnet", "network", "/subnets", "subnet", "subnets", Subnet, frozenset({"list", "read"})
)  # fmt: skip
# Listed by `common.ports.list_ports` (`Api.ports`); written here (a node's security groups).
PORTS = Resource("port", "network", "/ports", "port", "ports", Port, frozenset({"update"}))


class Api:
    def __init__(self, *, client: OpenStackClient) -> None:
        self._client = client
        self.backoff = Backoff(base=FIRST_RETRY, factor=RETRY_FACTOR, cap=MAX_RETRY)
        self.body_limit = BodyLimit()

    def retry_later(self, lb_id: str, why: str) -> RetryAfter:
        """`RetryAfter` for a load balancer that is not ready for the next step; the delay
        grows with each sync that finds it so (`backoff.reset(lb_id)` once it is)."""
        delay = self.backoff.next(lb_id)
        return RetryAfter(f"load balancer {lb_id} {why}; retrying in {delay:.1f}s", delay=delay)

    # --- the generic calls -----------------------------------------------------------------------
    def find(self, res: Resource[S], params: Params = None, *, parent: str = "") -> list[S]:
        """Every item the filters select, page after page."""
        _check(res, "list")
        return self._client.list_all(
            res.item,
            res.service,
            res.url(parent=parent),
            key=res.collection,
            request=f"{res.name}_list",
            params=params,
        )

    def of_lb(self, res: Resource[OfLb], lb_id: str) -> list[OfLb]:
        """The listeners (pools) of a load balancer."""
        listing = self.find(res, {"loadbalancer_id": lb_id})
        return [item for item in listing if _belongs(item.loadbalancers, lb_id)]

    def get(self, res: Resource[S], ident: str) -> S:
        """One item; `CloudNotFound` when it does not exist."""
        _check(res, "read")
        request = f"{res.name}_get"
        content = self._client.call(res.service, "GET", res.url(ident), request=request)
        return res.decode(content, request)

    def get_or_none(self, res: Resource[S], ident: str) -> S | None:
        try:
            return self.get(res, ident)
        except CloudNotFound:
            return None

    def create(self, res: Resource[S], body: Body, *, lb_id: str = "", parent: str = "") -> S:
        """The item made from `body`; for a `sized` resource, `BodyTooLarge` when the
        cloud's body limit refuses it (nothing was made)."""
        _check(res, "create")
        request = f"{res.name}_create"
        envelope = {res.key: body}
        if res.sized:
            self.body_limit.check(envelope, request)
        content = self._sized(
            res,
            envelope,
            lambda: self._send(
                res, "POST", res.url(parent=parent), request, body=envelope, ok=res.created,
                lb_id=lb_id,
            ),
        )  # fmt: skip
        return res.decode(content, request)

    def update(self, res: Resource[S], ident: str, body: Body, *, lb_id: str = "") -> S:
        _check(res, "update")
        request = f"{res.name}_update"
        content = self._send(
            res, "PUT", res.url(ident), request, body={res.key: body}, ok=(200,), lb_id=lb_id
        )
        return res.decode(content, request)

    def delete(
        self,
        res: Resource[Any],
        ident: str,
        *,
        lb_id: str = "",
        parent: str = "",
        params: Mapping[str, str] | None = None,
    ) -> None:
        """Gone, whether this call or an earlier one removed it."""
        _check(res, "delete")
        try:
            self._send(
                res, "DELETE", res.url(ident, parent=parent), f"{res.name}_delete",
                params=params, ok=res.deleted, lb_id=lb_id,
            )  # fmt: skip
        except CloudNotFound:
            return

    def set_tags(self, res: Resource[Any], ident: str, tags: list[str]) -> None:
        """Neutron's standard-attr tags: replace a floating IP's or security group's tags.
        Neutron takes no tags in the POST of either, so a create is followed by this call."""
        _check(res, "tags")
        self._send(
            res, "PUT", f"{res.url(ident)}/tags", f"{res.name}_tags_update", body={"tags": tags}
        )

    def ports(self, params: Params) -> list[Port]:
        """Neutron's ports (`common.ports`, the provider's one port listing)."""
        return list_ports(self._client, params)

    # --- pools' members at once ------------------------------------------------------------------
    def members_match(self, pool_id: str, wanted: Wanted) -> bool:
        """Whether the pool's members are exactly the wanted ones (by upstream's key). Read
        a page at a time as lean `MemberKey`s, compared and dropped: no id, key string or
        set per member, and never more than a page of them held (at 5,000 nodes, 20 syncs
        reading at once held 100,000). The first page with an unwanted member, or one too
        many, ends the read. Octavia refuses two members with one address and port in a
        pool, so the same count and every member wanted means the same set."""
        pages = self._client.pages(
            MemberKey,
            MEMBERS.service,
            MEMBERS.url(parent=pool_id),
            key=MEMBERS.collection,
            request=f"{MEMBERS.name}_list",
        )
        seen = 0
        for page in pages:
            seen += len(page)
            if seen > wanted.member_count or not all(wanted.has(m) for m in page):
                return False
        return seen == wanted.member_count

    def replace_members(self, lb_id: str, pool_id: str, members: msgspec.Raw) -> None:
        """The batch update: Octavia adds, updates and removes to match the list (202).
        `BodyTooLarge` when the list is over the cloud's body limit."""
        self._batch_members(lb_id, pool_id, members, additive_only=False)

    def add_members(self, lb_id: str, pool_id: str, members: msgspec.Raw) -> None:
        """The batch update with `additive_only`: adds (or updates) these members, keeps
        every other one."""
        self._batch_members(lb_id, pool_id, members, additive_only=True)

    def _batch_members(
        self, lb_id: str, pool_id: str, members: msgspec.Raw, *, additive_only: bool
    ) -> None:
        """`members`: the JSON list (`PoolSpec.member_list`), sent as it is."""
        body = {"members": members}
        self.body_limit.check_size(ENVELOPE + len(members), "member_batch_update")
        self._sized(
            None,
            body,
            lambda: self._send(
                MEMBERS,
                "PUT",
                MEMBERS.url(parent=pool_id),
                "member_batch_update",
                body=body,
                params={"additive_only": "true"} if additive_only else None,
                ok=(202,),
                lb_id=lb_id,
            ),
        )

    def _sized(self, res: Resource[Any] | None, body: Body, send: Callable[[], bytes]) -> bytes:
        """`send()`, turning a 413 into `BodyTooLarge` (and learning the limit) for a
        `sized` resource (`res` None: the members' batch update)."""
        try:
            return send()
        except CloudError as exc:
            if exc.status != 413 or (res is not None and not res.sized):
                raise
            size = body_size(body)
            self.body_limit.refused(size)
            raise BodyTooLarge(str(exc), size=size) from exc

    # --- one call --------------------------------------------------------------------------------
    def _send(
        self,
        res: Resource[Any],
        method: str,
        path: str,
        request: str,
        *,
        body: Body | None = None,
        params: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
        lb_id: str = "",
    ) -> bytes:
        """One call of `res`. For a resource that `waits`, a 409 while the load balancer
        `lb_id` is PENDING_* is `RetryAfter`."""
        try:
            return self._client.call(
                res.service, method, path, request=request, body=body, params=params, ok=ok
            )
        except CloudConflict as exc:
            if res.waits and lb_id and is_busy(exc):
                raise self.retry_later(lb_id, "is busy (HTTP 409)") from exc
            raise


def _check(res: Resource[Any], op: Op) -> None:
    if op not in res.allows:
        raise TypeError(f"the {res.name} resource allows no {op}")


def _belongs(refs: list[Ref], lb_id: str) -> bool:
    """Also checked here: an API that ignored the `loadbalancer_id` filter (as some
    proxies and the simulator do) must not make another Service's listeners look ours."""
    return not refs or any(ref.id == lb_id for ref in refs)
