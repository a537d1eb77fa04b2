"""The OpenStack simulator and provider fixtures of the provider tests, for
test_against_the_openstack_simulator.py (started only when a test asks for them)."""

from __future__ import annotations

from tests.provider.conftest import make_cloud, openstack_sim, sim  # noqa: F401
