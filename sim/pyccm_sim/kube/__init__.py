"""The kube simulator."""
