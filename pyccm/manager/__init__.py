"""The parent process: leader election, the one watch and cache, the bus server, the writer."""
