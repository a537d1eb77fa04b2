"""The OpenStack simulator: Keystone, Nova, Neutron and Octavia in one asyncio process.

pyccm's provider talks to OpenStack only through openstacksdk, so this package speaks the
real wire protocols (version discovery, Keystone v3 tokens and catalog, Nova microversion
headers, Neutron filters and errors, the Octavia provisioning state machine) well enough
for an unmodified `openstack.connect(...)` and the `openstack` CLI to work against it.

Layout (one module per concern, each with a docstring saying why it exists):

- `settings`   frozen start-up settings and the mutable fault knobs;
- `store`      tables, ids, IP pools and the list-query rules shared by the services;
- `errors`     one exception, rendered in each service's own JSON error shape;
- `calllog`    the call log and counters tests assert on;
- `keystone`, `nova`, `neutron`, `octavia`   one in-memory model + handlers per service;
- `seed`       builds a cloud that matches `sim.scenario` and writes clouds.yaml/cloud.conf;
- `app`        the aiohttp application: routing, auth, faults, the `/_sim` admin API;
- `server`     the `pyccm sim openstack` process; `testing` runs it in a thread for tests.
"""
