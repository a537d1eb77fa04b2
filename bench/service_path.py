"""How straight a Service's way through the service worker is: the modules one sync passes
through, in order, and how often it comes back to one it had already left.

    python -m bench.service_path

Each case is one sync of a Service key on the fake cloud (tests/support/services.py),
traced with `sys.setprofile`. A step is a change of the module whose code runs: a call
into another module, or a return to one. Counted are `pyccm` modules, except the
provider's (the cloud's own way is the provider's business) and except what the test's
stand-in for the manager runs when a write is committed (in the worker, the write goes to
the manager over the bus and the echo comes back on another thread). Modules: how many
different ones; returns: steps into a module already seen (steps - modules); to a
module: the returns into it. Each case is shown twice: through every counted module, and
through the service worker's own (`pyccm.workers.service`) only, where a call into a
helper elsewhere (a view's property, the projection's predicate, the clock) is no step.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from tests.support.services import Harness, harness, make_node, make_service

KEY = "default/web"


@dataclass(frozen=True)
class Path:
    steps: tuple[str, ...]

    @property
    def modules(self) -> int:
        return len(set(self.steps))

    def returns_to(self) -> Counter[str]:
        seen: set[str] = set()
        back: Counter[str] = Counter()
        for module in self.steps:
            if module in seen:
                back[module] += 1
            seen.add(module)
        return back


def traced(sync: Callable[[], object], *, within: str = "pyccm.") -> Path:
    """The steps of `sync()` through the modules whose names start with `within`."""
    stack: list[str] = []
    steps: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            stack.append(frame.f_globals.get("__name__", ""))
        elif event == "return" and stack:
            stack.pop()
        else:
            return
        running = _counted(stack, within)
        if running is not None and (not steps or steps[-1] != running):
            steps.append(running)

    sys.setprofile(profile)
    try:
        sync()
    except Exception:  # a case may end in RetryAfter or SyncFailed: its path is still one
        pass
    finally:
        sys.setprofile(None)
    return Path(tuple(steps))


def _counted(stack: list[str], within: str) -> str | None:
    """The module running now, or None inside the stand-in manager or the provider."""
    if not stack or any(m.startswith("tests.") for m in stack):
        return None
    running = stack[-1]
    if not running.startswith(within) or running.startswith("pyccm.provider."):
        return None
    return running


def new_service() -> tuple[Harness, Callable[[], object]]:
    h = harness()
    h.put(make_service())
    return h, lambda: h.controller.sync(KEY)


def members_moved() -> tuple[Harness, Callable[[], object]]:
    h = harness()
    h.put(make_service())
    h.controller.sync(KEY)
    h.put(make_node("n3"))
    h.sweep()
    return h, lambda: h.controller.sync(KEY)


def deleted() -> tuple[Harness, Callable[[], object]]:
    h = harness()
    h.put(make_service())
    h.controller.sync(KEY)
    service = h.replica.service(KEY)
    assert service is not None
    import msgspec

    meta = msgspec.structs.replace(service.metadata, deletion_timestamp="2026-11-21T00:00:00Z")
    h.put(msgspec.structs.replace(service, metadata=meta))
    return h, lambda: h.controller.sync(KEY)


CASES = {
    "a new Service (finalizer, ensure, status)": new_service,
    "a node joined (members only)": members_moved,
    "a deleted Service (delete, finalizer off)": deleted,
}


# The two views: every pyccm module but the provider's, and the service worker's own.
VIEWS = {"pyccm": "pyccm.", "pyccm.workers.service": "pyccm.workers.service."}


def main() -> None:
    for name, case in CASES.items():
        print(f"## {name}")
        for view, within in VIEWS.items():
            _, sync = case()
            path = traced(sync, within=within)
            back = path.returns_to()
            short = " > ".join(".".join(m.split(".")[-2:]) for m in path.steps)
            counts = f"steps {len(path.steps)}, modules {path.modules}"
            print(f"{view}: {counts}, returns {sum(back.values())}")
            print("  returns to: " + ", ".join(f"{m} {n}" for m, n in back.most_common()))
            print("  " + short)
        print()


if __name__ == "__main__":
    main()
