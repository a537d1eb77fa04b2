"""The openstack simulator."""
