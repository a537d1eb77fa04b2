"""Pod-network routes on a Neutron router: `router.py` (the routes and their address pairs, in
batches) and `ownership.py` (the router's `pyccm-routes` claims, for `pyccm gc`)."""
