"""One process per controller: the shared worker runtime and the node, lifecycle, service and
route controllers."""
