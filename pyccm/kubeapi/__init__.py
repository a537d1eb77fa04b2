"""Access to the Kubernetes API: one client, its configuration, errors, informers and writer.

The manager uses it, and so does a worker in `--standalone` mode (same informer, same
writer, no bus), which is why it is its own layer rather than part of `manager/`
(docs/architecture.md#style-layers: workers never import the manager). It reads
kubeconfigs and the in-cluster service account itself (`config`, `credentials`), sends
requests through urllib3, and decodes answers with msgspec into lean views: nothing in
pyccm imports the `kubernetes` package, whose import alone loads all its API models.
"""
