"""Typed decodes share one decoder per type, built by one thread while the others wait.

Concurrent first decodes into a new type crashed a worker (SIGSEGV inside msgspec 0.22);
`python -m bench.decode_race` measures that crash rate with and without this module.
"""

from __future__ import annotations

import threading

import msgspec
import pytest

from pyccm.protocol.decoding import decode_json, json_decoder


def test_every_thread_decodes_a_new_type_with_the_one_decoder_built_for_it() -> None:
    leaf = msgspec.defstruct("Leaf", [("id", str)], frozen=True)
    page = msgspec.defstruct("Page", [("items", list[leaf])], frozen=True)  # type: ignore[valid-type]
    barrier = threading.Barrier(32)
    seen: list[object] = []
    decoded: list[object] = []

    def first_use() -> None:
        barrier.wait()
        seen.append(json_decoder(page))
        decoded.append(decode_json(b'{"items": [{"id": "a"}]}', page))

    threads = [threading.Thread(target=first_use) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(decoder) for decoder in seen}) == 1
    assert decoded == [page(items=[leaf(id="a")])] * 32


def test_a_body_of_the_wrong_shape_is_a_validation_error() -> None:
    leaf = msgspec.defstruct("Leaf", [("id", str)], frozen=True)
    with pytest.raises(msgspec.ValidationError, match=r"Expected `str`, got `int` - at `\$.id`"):
        decode_json(b'{"id": 3}', leaf)
