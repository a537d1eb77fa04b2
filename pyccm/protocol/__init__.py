"""What crosses the bus: lean views of Kubernetes objects and the message union.

    messages.py     every message, one tagged union (msgpack)
    views.py        the Node and Service views, decoded straight from the API's JSON
    projections.py  each controller's view of them, and its PUB/SUB channels
    controllers.py  the controllers' names: each view's name, channel prefix and
                    `Hello.view` (plus `--controllers`, which spells the same names)
    decoding.py     the typed JSON decoders (the views among them), thread-safe
    drops.py        a malformed frame counted and dropped, never a crash
    mailbox.py      how other threads hand work to the thread that owns a bus's sockets
    bus_settings.py what both ends of the bus set alike: heartbeats, silence, the PUB's
                    high-water mark, linger, CURVE on each side

Flags shared by the manager and workers are in pyccm/flags, the metrics merge in
pyccm/exposition.py, the `pyccm keys` command in pyccm/keys_command.py.
"""
