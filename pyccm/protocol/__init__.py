"""What crosses the bus: lean views of Kubernetes objects and the message union."""
