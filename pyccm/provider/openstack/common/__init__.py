"""What the OpenStack provider's capabilities share besides the transport.

* `resources.py`: the lean views of the Nova and Neutron JSON (servers, ports, networks,
  routers, extensions);
* `provider_ids.py`: a Node's providerID, `openstack://[<region>]/<server id>`;
* `ports.py`: the one Neutron port listing (a server's ports, a security group's, a router
  network's, an address's);
* `concurrency.py`: calls side by side on daemon threads;
* `features.py`: the Octavia API version and the Neutron extensions, read once.

It builds on the transport; `instances`, `routes` and `loadbalancer` build on both and
never on each other (`.importlinter`: `provider-capabilities-are-independent`).
"""
