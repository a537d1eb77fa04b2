"""Every process pyccm starts ends with the process that started it, however that one ends.

The demo, the benches, the conformance harness and the test fixtures start process trees
(simulators, supervisord and its programs, real OpenStack services). Three ways their
starter can end, three paths, all written here once:

* it returns or raises: the `with running(...)` (or the caller's own `stop()`) that started
  a child stops it, SIGTERM and then SIGKILL, and an `atexit` hook stops any child still
  running when the interpreter exits;
* a signal: `stop_on_signals()` installs handlers for SIGINT, SIGTERM and SIGHUP that raise
  `Signalled` (a `SystemExit`, code 128 + the signal), so the same `with` blocks unwind. It
  installs them explicitly and unblocks the three: a process started with SIGINT ignored
  (what a non-interactive shell gives a background job: `nohup make test &`) or with them
  blocked still hears them;
* SIGKILL, or a crash that runs no Python: each child asked the kernel at its start for a
  signal when its parent dies (Linux's PR_SET_PDEATHSIG, SIGTERM by default), so supervisord
  stops its programs as on any stop, and a simulator serves no further. supervisord's own
  programs ask for the same when they start (`tie_to_starter`, from `pyccm tree`'s
  `PYCCM_TIED_TO`): a supervisord killed outright takes them with it too.

The kernel sends that signal when the *thread* that forked the child ends, not the process:
`spawn()` therefore forks every long-running child from one daemon thread that lives as
long as the process, whatever thread asks. `tied()` gives the same start hook to a blocking
`subprocess.run`, whose calling thread outlives its child by construction.

Each spawned child leads its own process group: a Ctrl-C at the terminal reaches the starter
alone, which stops its children in order (the tree before the simulators it talks to), and
`stop()` ends with SIGKILL to the whole group, so nothing the child started in its group
stays behind.

Standard library only: the demo, the benches, the tests and the conformance harness (whose
services run from other virtual environments, not the child's code) all use it.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from typing import Any

# <linux/prctl.h>
PR_SET_PDEATHSIG = 1
# The signals a starter stops its children on.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Seconds a child has between SIGTERM and SIGKILL (supervisord's own stopwaitsecs is 15).
STOP_TIMEOUT = 20.0

_prctl: Callable[..., int] | None = None
if sys.platform == "linux":
    # Resolved now, in the parent: the start hook runs between fork and exec and should do
    # no more than call it.
    _prctl = ctypes.CDLL(None, use_errno=True).prctl


class Signalled(SystemExit):
    """Raised by the handlers of `stop_on_signals()`: unwinds like `sys.exit(128 + signum)`."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def _raise_signalled(signum: int, frame: object) -> None:
    raise Signalled(signum)


def stop_on_signals(signals: Sequence[int] = STOP_SIGNALS) -> None:
    """SIGINT, SIGTERM and SIGHUP raise `Signalled` in the main thread, whatever the
    dispositions and the mask this process inherited (call it from the main thread, before
    starting children: they inherit the default action for each, not an inherited SIG_IGN)."""
    for signum in signals:
        signal.signal(signum, _raise_signalled)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


def tied(death_signal: int = signal.SIGTERM) -> dict[str, Any]:
    """Popen keyword arguments that give the child `death_signal` when this thread ends.

    For a blocking `subprocess.run(...)` (its thread waits for the child); a long-running
    child is started with `spawn()`."""
    return {"preexec_fn": _start_hook(os.getpid(), death_signal)}


def die_with_parent(parent: int, death_signal: int = signal.SIGTERM) -> None:
    """This process gets `death_signal` when `parent` (the pid it was started by) dies.

    The start hook of `spawn()` and `tied()`; a child started some other way (a
    multiprocessing target) calls it first thing, with its starter's pid as an argument."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
    # A blocked mask survives exec: the child could never hear the signals it is stopped with.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    if _prctl is not None and os.getppid() != parent:
        # The parent died before prctl: the kernel will never send it.
        os.kill(os.getpid(), death_signal)


# Set by a starter that cannot pass a start hook (supervisord starts the tree's programs):
# the pid of that starter. A `pyccm` process whose parent has that pid dies with it.
TIED_TO_ENV = "PYCCM_TIED_TO"


def tie_to_starter() -> None:
    """`die_with_parent()` for a `pyccm` process started by the process `PYCCM_TIED_TO`
    names (supervisord, under `pyccm tree`): a supervisord killed outright leaves no manager
    or worker running on, even one killed while they were still starting (their parent is
    then another process already: they end at once). The variable is taken out of this
    process's environment, so nothing it starts in turn inherits it."""
    starter = os.environ.pop(TIED_TO_ENV, "")
    if starter.isdigit():
        die_with_parent(int(starter))


def _start_hook(parent: int, death_signal: int) -> Callable[[], None]:
    # Runs between fork and exec, in the child: no locks, no imports, two system calls.
    return lambda: die_with_parent(parent, death_signal)


def spawn(
    args: Sequence[str], *, death_signal: int = signal.SIGTERM, **popen: Any
) -> subprocess.Popen[Any]:
    """`subprocess.Popen(args, **popen)` tied to this process: `death_signal` when it dies,
    its own process group, stopped at interpreter exit if nobody stopped it before."""
    hook = _start_hook(os.getpid(), death_signal)

    def start() -> subprocess.Popen[Any]:
        # The hook calls prctl and pthread_sigmask and takes no lock another thread could hold.
        process = subprocess.Popen(args, preexec_fn=hook, process_group=0, **popen)  # noqa: PLW1509
        # Registered by the thread that started it: a caller interrupted while it waits
        # for the answer still leaves it to the exit hook.
        with _LOCK:
            _RUNNING.append(process)
        return process

    started: subprocess.Popen[Any] = _Spawner.call(start)
    return started


def stop(process: subprocess.Popen[Any], *, timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM; SIGKILL after `timeout` seconds; then SIGKILL to whatever is left of its
    process group. Returns the exit status (negative: the signal that ended it)."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with _LOCK:
        if process in _RUNNING:
            _RUNNING.remove(process)
    return process.returncode


@contextmanager
def running(
    args: Sequence[str],
    *,
    timeout: float = STOP_TIMEOUT,
    death_signal: int = signal.SIGTERM,
    **popen: Any,
) -> Iterator[subprocess.Popen[Any]]:
    """`spawn()` for the `with` block, `stop()` after it, however it ends."""
    process = spawn(args, death_signal=death_signal, **popen)
    try:
        yield process
    finally:
        stop(process, timeout=timeout)


_LOCK = threading.Lock()
_RUNNING: list[subprocess.Popen[Any]] = []


@atexit.register
def _stop_the_rest() -> None:
    """At interpreter exit, the children nobody stopped, the last started first."""
    while True:
        with _LOCK:
            if not _RUNNING:
                return
            process = _RUNNING[-1]
        stop(process)


class _Spawner:
    """The one thread every `spawn()` forks from: it lives as long as the process."""

    _requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
    _thread: threading.Thread | None = None
    _start = threading.Lock()

    @classmethod
    def call(cls, function: Callable[[], Any]) -> Any:
        with cls._start:
            if cls._thread is None or not cls._thread.is_alive():
                cls._thread = threading.Thread(target=cls._serve, name="spawner", daemon=True)
                cls._thread.start()
        done: Future[Any] = Future()
        cls._requests.put((function, done))
        return done.result()

    @classmethod
    def _serve(cls) -> None:
        while True:
            function, done = cls._requests.get()
            try:
                done.set_result(function())
            except BaseException as error:  # handed to the caller, who raises it
                done.set_exception(error)
