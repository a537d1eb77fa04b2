"""Access to the Kubernetes API: one client, its errors, informers and the writer.

The manager uses it, and so does a worker in `--standalone` mode (same informer, same
writer, no bus), which is why it is its own layer rather than part of `manager/`
(docs/architecture.md#style-layers: workers never import the manager). It is the only layer, with
the manager, that
imports the `kubernetes` package, and it uses it for configuration and authentication
only: requests go out raw and responses are decoded with msgspec into lean views.
"""
