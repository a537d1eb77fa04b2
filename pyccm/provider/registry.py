"""Providers by name: `--cloud-provider NAME` resolves here.

Providers register through the `pyccm.providers` entry-point group, so a third party can
ship one in its own distribution (`[project.entry-points."pyccm.providers"] mycloud =
"mypkg.cloud:create_cloud"`); the simulators' distribution adds `fake`, the in-memory
cloud of the controllers' tests, this way. The built-in `openstack` is also known directly,
so a checkout that was never installed (or an entry-point table not yet written) still
resolves it.
An entry point wins over a built-in of the same name.

A factory takes the process's `ProviderSettings` by keyword and returns a `Cloud`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Protocol, cast

from pyccm.provider.errors import ConfigError
from pyccm.provider.interface import Cloud
from pyccm.provider.settings import ProviderSettings

ENTRY_POINT_GROUP = "pyccm.providers"

BUILTIN_PROVIDERS: Mapping[str, str] = {
    "openstack": "pyccm.provider.openstack:create_cloud",
}


class ProviderFactory(Protocol):
    def __call__(self, *, settings: ProviderSettings) -> Cloud: ...


def _targets() -> dict[str, str]:
    targets = dict(BUILTIN_PROVIDERS)
    targets.update({ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)})
    return targets


def known_providers() -> list[str]:
    return sorted(_targets())


def _load(target: str) -> Callable[..., object]:
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    loaded = getattr(module, attribute) if attribute else module
    if not callable(loaded):
        raise ConfigError(f"cloud provider entry point {target!r} is not callable")
    return cast("Callable[..., object]", loaded)


def provider_factory(name: str) -> ProviderFactory:
    """The factory registered as `name`; `ConfigError` (one line) for an unknown name."""
    targets = _targets()
    if name not in targets:
        known = ", ".join(sorted(targets))
        raise ConfigError(f"unknown cloud provider {name!r} (known: {known})")
    return cast("ProviderFactory", _load(targets[name]))


def create_cloud(name: str, *, settings: ProviderSettings) -> Cloud:
    """Resolve `name` and build its cloud from `settings`."""
    return provider_factory(name)(settings=settings)
