"""The bus settings both ends use, set once: the manager's (manager/bus.py) and a worker's
(workers/runtime/bus.py) sockets, beats and patience.

How often each end beats, how many missed beats mean the other end is gone
(docs/architecture.md#bus-heartbeats), how many frames the manager's PUB queues for one
subscriber, how a socket closes, and how CURVE (flags/addresses.py) is set on each side.
"""

from __future__ import annotations

import zmq

from pyccm.flags.addresses import ClientCurve, ServerCurve

# Both ends beat this often: the manager on PUB to every worker, each worker on its DEALER.
HEARTBEAT_INTERVAL = 1.0
# This many beats missed and the other end is gone: a worker resnapshots from (or moves away
# from) a silent manager; the leader's /healthz fails a silent worker.
MISSED_HEARTBEATS = 3
SILENCE_TIMEOUT = MISSED_HEARTBEATS * HEARTBEAT_INTERVAL

# The manager's PUB drops frames past this many queued for one subscriber: a slow worker sees
# a gap and resnapshots instead of growing the manager's memory without bound.
PUB_SEND_HWM = 200_000

# Milliseconds a closing socket keeps unsent frames: none. Nothing queued for or from a manager
# (or a worker) that is gone survives a close, a move or a stop.
LINGER = 0


def secure_server(sock: zmq.Socket[bytes], curve: ServerCurve | None) -> None:
    """The manager's side: a CURVE server with its key pair (no-op without keys)."""
    if curve is None:
        return
    sock.setsockopt(zmq.CURVE_SERVER, 1)
    sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret_key)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, curve.public_key)


def secure_client(sock: zmq.Socket[bytes], curve: ClientCurve | None) -> None:
    """A worker's side: the manager's public key and the worker's key pair (no-op without
    keys)."""
    if curve is None:
        return
    sock.setsockopt(zmq.CURVE_SERVERKEY, curve.server_key)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, curve.public_key)
    sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret_key)
