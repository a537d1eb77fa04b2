"""The cloud-node-lifecycle controller: deletes Nodes whose servers are gone and taints
those that are shut down."""
