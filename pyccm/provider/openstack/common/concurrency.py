"""Calls made side by side on daemon threads, never a `ThreadPoolExecutor`.

The executor's threads are joined at interpreter exit, which kept a SIGTERMed worker alive
until every queued call was made; daemon threads let a stopping worker go at once. Used by
the instances (port lists of a batch of servers) and the routes (next hops' ports).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sized
from typing import TypeVar

from pyccm.provider.errors import CloudError, ProviderError

T = TypeVar("T")


def concurrently(
    call: Callable[[T], None], items: Iterable[T], *, limit: int, name: str
) -> list[ProviderError | None]:
    """`call(item)` for every item, at most `limit` at once on threads named `name`; each
    item's error or None, in the items' order.

    Daemon threads, so a worker that is stopping never waits for them; any exception is
    kept as that item's error, so one failure (even a provider bug) never stops the others.
    `items` may be a generator that makes calls of its own (the pages of a listing): it is
    advanced by one thread at a time, as a thread comes free, and an error it raises ends
    it and is the last entry of the list.
    """
    errors: list[ProviderError | None] = []
    pending = iter(items)
    lock = threading.Lock()

    def taken() -> tuple[int, T] | None:
        with lock:
            try:
                item = next(pending)
            except StopIteration:
                return None
            except Exception as error:  # the generator's own call failed: it is over
                errors.append(_provider_error(error))
                pending_done()
                return None
            errors.append(None)
            return len(errors) - 1, item

    def pending_done() -> None:
        nonlocal pending
        pending = iter(())

    def work() -> None:
        while (next_item := taken()) is not None:
            index, item = next_item
            try:
                call(item)
            except Exception as error:  # kept as this item's failure
                errors[index] = _provider_error(error)

    count = len(items) if isinstance(items, Sized) else limit
    if count <= 1:
        work()
        return errors
    threads = [
        threading.Thread(target=work, name=name, daemon=True) for _ in range(min(limit, count))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _provider_error(error: Exception) -> ProviderError:
    return (
        error
        if isinstance(error, ProviderError)
        else CloudError(f"{type(error).__name__}: {error}")
    )
