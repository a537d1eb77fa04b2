"""The route controller: one pod-network route per node podCIDR on the cloud router, and the
nodes' NetworkUnavailable condition."""
