"""JSON decoders built once per type, one at a time: the only way pyccm decodes into a type.

msgspec (0.22 here) builds and caches what it knows of a Struct type the first time it
decodes into it, and that is not safe when two threads do it at once: a worker whose sync
threads all decoded their first listener or port page together died of SIGSEGV inside
`msgspec.json.decode` (the large-cluster bench saw it four times). A stress of 48 threads
doing first decodes of the provider's page types (`bench/decode_race.py`) crashed 3 of 450
processes on a busy machine, none of 400 with the decoders built under a lock, and none
either way on a quiet one.
So every typed decode goes through a `msgspec.json.Decoder` made here, under one lock, and
reused: building it does the type's first-use work, and a built decoder is thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_lock = threading.Lock()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def json_decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    """The decoder of `kind`, built on first use while no other thread builds one."""
    decoder = _decoders.get(kind)
    if decoder is None:
        with _lock:
            decoder = _decoders.get(kind)
            if decoder is None:
                decoder = msgspec.json.Decoder(kind)
                _decoders[kind] = decoder
    return decoder


def decode_json(content: bytes | str, kind: type[T]) -> T:
    """`content` decoded into `kind`; raises msgspec.DecodeError / ValidationError."""
    return json_decoder(kind).decode(content)
