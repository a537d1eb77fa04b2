"""The cloud-node controller: initializes new Nodes from the cloud, refreshes addresses."""
