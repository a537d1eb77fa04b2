"""Upstream's InstancesV2 on Nova and Neutron: `nova.py` (lookups, listings, metadata) and
`addresses.py` (the node address algorithm)."""
