"""A thread-safe mailbox that a ZeroMQ poller can wait on.

ZeroMQ sockets belong to one thread, so the thread that owns a bus's sockets receives
work from other threads here: items go into a queue, and one byte into a non-blocking
pipe wakes the owner's `zmq.Poller` (which polls plain file descriptors too). A full pipe
already means "wake up", so a write that would block is skipped, and senders never wait.
"""

from __future__ import annotations

import contextlib
import os
import queue
from typing import Generic, TypeVar

Item = TypeVar("Item")


class Mailbox(Generic[Item]):
    def __init__(self) -> None:
        self._items: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def fileno(self) -> int:
        return self._read

    def put(self, item: Item) -> None:
        self._items.put(item)
        with contextlib.suppress(BlockingIOError):
            os.write(self._write, b"\0")

    def drain(self) -> list[Item]:
        """Everything queued so far; call when the poller says the pipe is readable."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 65536):
                pass
        items: list[Item] = []
        while True:
            try:
                items.append(self._items.get_nowait())
            except queue.Empty:
                return items

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)
