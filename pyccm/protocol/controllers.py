"""The four controllers' names, and `--controllers` parsing (upstream's rules and aliases).

Both sides need them: the manager to know which workers to expect (its `/healthz` has one
check per worker), the workers to know who they are.
"""

from __future__ import annotations

# canonical short name (process and metric name) -> upstream's long name, accepted as alias
CONTROLLERS: dict[str, str] = {
    "cloud-node": "cloud-node-controller",
    "cloud-node-lifecycle": "cloud-node-lifecycle-controller",
    "service": "service-lb-controller",
    "route": "node-route-controller",
}
# `pyccm worker <name>` accepts these short forms too.
WORKER_ALIASES: dict[str, str] = {"node": "cloud-node", "lifecycle": "cloud-node-lifecycle"}


def canonical(name: str) -> str:
    """The short name for any accepted spelling; ValueError for an unknown one."""
    for short, long in CONTROLLERS.items():
        if name in (short, long):
            return short
    if name in WORKER_ALIASES:
        return WORKER_ALIASES[name]
    known = ", ".join(sorted(CONTROLLERS))
    raise ValueError(f"unknown controller {name!r} (known: {known}, or '*')")


def parse_controllers(value: str) -> tuple[str, ...]:
    """`*` enables all; `name` enables one; `-name` disables one (upstream's flag)."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    enabled: set[str] = set()
    disabled: set[str] = set()
    for item in items:
        if item == "*":
            enabled.update(CONTROLLERS)
        elif item.startswith("-"):
            disabled.add(canonical(item[1:]))
        else:
            enabled.add(canonical(item))
    return tuple(name for name in CONTROLLERS if name in enabled and name not in disabled)
