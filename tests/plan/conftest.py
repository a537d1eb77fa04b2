"""The simulators and the process runner of `tests/gc`."""

from __future__ import annotations

from tests.gc.conftest import cluster_id, kube, make_lbs, openstack_sim, sim

__all__ = ["cluster_id", "kube", "make_lbs", "openstack_sim", "sim"]
