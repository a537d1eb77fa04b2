"""Simulators that speak the real wire protocols: the Kubernetes API and OpenStack.

They let the real clients (kubernetes, kubectl, openstacksdk, the openstack CLI), the demo,
the tests and the benchmarks run on a machine with neither a cluster nor a cloud.
"""
