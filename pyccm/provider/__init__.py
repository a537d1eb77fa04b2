"""The cloud interface the controllers program against, its registry, and its implementations."""
