"""How each service pages a list: its order, its page cap, its markers and its links.

The three services page differently, and a client that works against one of them can
still loop, stop early or 400 against another, so each one's rules are reproduced here
side by side (read from Octavia 19, Nova 34 and Neutron 29):

- **Octavia** (`octavia/api/common/pagination.py`) always pages: `pagination_max_limit`
  (1000) caps every list, rows come in `created_at, id` order, a `marker` must name an
  existing row of that kind (else 400), and `<collection>_links` is always in the body.
  It holds `next` whenever the page is *full* (so a list of exactly 1000 gets a `next`
  link to an empty page) and `previous` whenever a marker was sent. Links carry only
  `limit`, `sort`/`sort_key` and `marker`, never the filters. `page_reverse=True`
  selects the rows before the marker but keeps ascending order and takes the *first*
  `limit` of them, as the real query does.
- **Nova** (`nova/api/openstack/common.py`) caps at `[api] max_limit` (1000), lists
  servers newest first (`created_at desc, id desc`) and flavors by id, answers 400
  `marker [X] not found`, returns nothing for `limit=0`, and adds `servers_links` only
  when the page is full; the link repeats every query parameter with the new marker.
- **Neutron** (`neutron/api/api_common.py`) pages only when the client sends `limit`
  (`pagination_max_limit` is -1); a paged list is sorted by id, a missing marker is the
  resource's 404, and both `next` (unless a forward page came back short) and `previous`
  (unless a reverse page came back short) links keep every other query parameter.

Sorting costs O(k log k) for the k rows that passed the filters; rows are rendered by
the callers only for the page they return.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from multidict import MultiMapping

from pyccm_sim.openstack.errors import ApiError, bad_request
from pyccm_sim.openstack.store import Record

Key = Callable[[Record], Any]
Link = dict[str, str]
NOVA_LIMIT = re.compile(r"^[0-9]+$")


@dataclass(frozen=True)
class Page:
    """One page of rows and the links the service puts beside it (possibly none)."""

    rows: list[Record]
    links: list[Link] = field(default_factory=list)


def _around(rows: list[Record], key: Key, marker: Record, *, before: bool) -> list[Record]:
    """The rows of `rows` (ascending by `key`) strictly before or after `marker`."""
    mark = key(marker)
    if before:
        return rows[: bisect_left(rows, mark, key=key)]
    return rows[bisect_right(rows, mark, key=key) :]


# -- Octavia ------------------------------------------------------------------------------


def octavia_key(row: Record) -> tuple[str, str]:
    return (row["created_at"], row["id"])


def _octavia_limit(query: MultiMapping[str], cap: int | None) -> int | None:
    raw = query.get("limit")
    if raw is None:
        return cap
    try:
        # 'infinite', 0 and negative numbers all mean "no limit" to Octavia.
        if raw == "infinite" or int(raw) < 1:
            return None
        return int(raw) if cap is None else min(int(raw), cap)
    except ValueError:
        # Raised in a pecan hook before WSME runs, so webob's JSON error shape, not a fault.
        message = f"Supplied pagination limit '{raw}' is not valid."
        body = {"code": 400, "title": "Bad Request", "description": message}
        raise ApiError(400, message, body=body) from None


def octavia_page(
    rows: list[Any],
    query: MultiMapping[str],
    *,
    lookup: Callable[[str], Any],
    cap: int | None,
    url: str,
    key: Callable[[Any], tuple[str, str]] = octavia_key,
    presorted: bool = False,
) -> Page:
    """Octavia's page of `rows`; `lookup` finds a marker among the rows of the kind.

    `key` gives a row's `(created_at, id)`; `presorted` rows are already in that order
    (a pool's members), so a page costs O(log n + page) instead of a sort.
    """
    limit = _octavia_limit(query, cap)
    ordered = rows if presorted else sorted(rows, key=key)
    marker = query.get("marker")
    if marker is not None:
        marked = lookup(marker)
        if marked is None:
            raise bad_request(f"Supplied pagination marker '{marker}' is not valid.")
        before = query.get("page_reverse", "False") == "True"
        ordered = _around(ordered, key, marked, before=before)
    page = ordered if limit is None else ordered[:limit]
    if not page:
        return Page(page)
    edges = (key(page[0])[1], key(page[-1])[1])
    return Page(page, _octavia_links(edges, len(page), query, limit=limit, cap=cap, url=url))


def _octavia_links(
    edges: tuple[str, str],
    size: int,
    query: MultiMapping[str],
    *,
    limit: int | None,
    cap: int | None,
    url: str,
) -> list[Link]:
    """Links beside a non-empty page of `size` rows whose first and last ids are `edges`."""
    common = [f"limit={limit}"]
    common += [f"{name}={query[name]}" for name in ("sort", "sort_key") if query.get(name)]
    links = []
    if query.get("marker"):
        previous = [*common, f"marker={edges[0]}", "page_reverse=True"]
        links.append({"rel": "previous", "href": f"{url}?{'&'.join(previous)}"})
    # Octavia adds `next` to every full page, and to every page when the client asked
    # for no limit (`limit=None` in the href). With the cap knob at 0 (no cap at all)
    # the simulator adds none: see the README's differences.
    full = size >= limit if limit is not None else cap is not None
    if full:
        following = [*common, f"marker={edges[1]}"]
        links.append({"rel": "next", "href": f"{url}?{'&'.join(following)}"})
    return links


# -- Nova ---------------------------------------------------------------------------------


def _nova_limit(query: MultiMapping[str], cap: int | None) -> int | None:
    raw = query.get("limit")
    if raw is None:
        return cap
    if not NOVA_LIMIT.match(raw):
        raise bad_request(
            f"Invalid input for query parameters limit. Value: {raw}. "
            f"'{raw}' does not match '^[0-9]*$'"
        )
    return int(raw) if cap is None else min(int(raw), cap)


def nova_page(
    rows: list[Record],
    query: MultiMapping[str],
    *,
    key: Key,
    newest_first: bool,
    lookup: Callable[[str], Record | None],
    cap: int | None,
    url: str,
    presorted: bool = False,
) -> Page:
    """Nova's page: `rows` ordered by `key` (descending if `newest_first`); `presorted`
    rows are already ascending by `key`."""
    limit = _nova_limit(query, cap)
    ordered = list(rows) if presorted else sorted(rows, key=key)
    marker = query.get("marker")
    if marker is not None:
        marked = lookup(marker)
        if marked is None:
            raise bad_request(f"marker [{marker}] not found")
        ordered = _around(ordered, key, marked, before=newest_first)
    if newest_first:
        ordered.reverse()
    page = ordered if limit is None else ordered[:limit]
    if limit is None or limit == 0 or len(page) != limit:
        return Page(page)
    params = dict(sorted(query.items()))
    params["marker"] = page[-1]["id"]
    return Page(page, [{"rel": "next", "href": f"{url}?{urlencode(params)}"}])


# -- Neutron ------------------------------------------------------------------------------


def _neutron_limit(query: MultiMapping[str]) -> int:
    raw = query.get("limit", "0")
    try:
        limit = int(raw)
    except ValueError:
        limit = -1
    if limit < 0:
        raise ApiError(
            400,
            f"Bad limit request: Limit must be an integer 0 or greater and not '{raw}'.",
            kind="BadRequest",
        )
    return limit


def neutron_page(
    rows: list[Record],
    query: MultiMapping[str],
    *,
    lookup: Callable[[str], Record],
    url: str,
) -> Page:
    """Neutron's page; `lookup` raises the resource's 404 for an unknown marker."""
    limit = _neutron_limit(query)
    if not limit:
        return Page(list(rows))
    ordered = sorted(rows, key=_by_id)
    reverse = query.get("page_reverse", "False").lower() == "true"
    marker = query.get("marker")
    if marker:
        ordered = _around(ordered, _by_id, lookup(marker), before=reverse)
    page = ordered[-limit:] if reverse else ordered[:limit]
    short = len(page) < limit
    links = []
    if not (short and not reverse):
        links.append({"rel": "next", "href": _neutron_href(url, query, page[-1:], reverse=False)})
    if not (short and reverse):
        links.append({"rel": "previous", "href": _neutron_href(url, query, page[:1], reverse=True)})
    return Page(page, links)


def _by_id(row: Record) -> str:
    return str(row["id"])


def _neutron_href(url: str, query: MultiMapping[str], edge: list[Record], *, reverse: bool) -> str:
    params: list[tuple[str, str]] = [
        (name, value) for name, value in query.items() if name not in {"marker", "page_reverse"}
    ]
    if edge:
        params.append(("marker", edge[0]["id"]))
    if reverse:
        params.append(("page_reverse", "True"))
    return f"{url}?{urlencode(params)}"
