"""pyccm: a Kubernetes cloud-controller-manager for OpenStack, one process per controller."""

__version__ = "0.1.0"
