"""Calls made side by side on daemon threads, never a `ThreadPoolExecutor`.

The executor's threads are joined at interpreter exit, which kept a SIGTERMed worker alive
until every queued call was made; daemon threads let a stopping worker go at once. Used by
the instances (port lists of a batch of servers) and the routes (next hops' ports).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from pyccm.provider.errors import CloudError, ProviderError

T = TypeVar("T")


def concurrently(
    call: Callable[[T], None], items: Sequence[T], *, limit: int, name: str
) -> list[ProviderError | None]:
    """`call(item)` for every item, at most `limit` at once on threads named `name`; each
    item's error or None.

    Daemon threads, so a worker that is stopping never waits for them; any exception is
    kept as that item's error, so one failure (even a provider bug) never stops the others.
    """
    errors: list[ProviderError | None] = [None] * len(items)
    pending = iter(range(len(items)))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                index = next(pending, None)
            if index is None:
                return
            try:
                call(items[index])
            except ProviderError as error:
                errors[index] = error
            except Exception as error:  # kept as this item's failure
                errors[index] = CloudError(f"{type(error).__name__}: {error}")

    if len(items) <= 1:
        work()
        return errors
    threads = [
        threading.Thread(target=work, name=name, daemon=True) for _ in range(min(limit, len(items)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors
