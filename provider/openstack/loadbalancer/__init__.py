"""Octavia load balancers for `type: LoadBalancer` Services (reference §3).

The place for the LoadBalancers implementation; it is built separately. Until then
`build_load_balancers` raises `NotSupported`, so the OpenStack cloud offers no load
balancer capability and the service worker idles, as upstream does with
`[LoadBalancer] enabled = false`.
"""
