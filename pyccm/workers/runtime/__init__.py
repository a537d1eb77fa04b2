"""The runtime every controller process shares: bus client, replica store, work queue, runner."""
