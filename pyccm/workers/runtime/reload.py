"""Keeps a worker's cloud configuration current without a restart.

Every `--cloud-config-reload-period` (and at once on SIGHUP) a worker asks its cloud to
re-read its configuration (`provider.interface.ReloadableCloud`). The provider compares the
files' content, so a check that finds nothing new costs a few file reads; polling content
rather than watching inodes is what sees Kubernetes' update of a mounted Secret (a new
`..data` symlink) and needs no extra dependency.

What the worker promises around it:

* a new configuration is in force for every cloud call from then on; one INFO line names
  the sections that changed (and a setting that waits for a restart, if one did), and the
  controllers whose capability it configures look at their objects again at once (the
  `Periodic`s that declare `wakes_on`): a new `[LoadBalancer]` default reaches the existing
  Services by a resync now, as an upstream restart would, instead of after
  `--lb-resync-period`;
* a file that cannot be used changes nothing: one WARNING line (file, section, key, what is
  wrong, never a value), `pyccm_cloud_config_reloads_total{result="failure"}`, and
  `pyccm_cloud_config_last_reload_successful` 0 until a usable file is in place; the same
  bad content is reported once;
* a file that changed without changing a setting does nothing at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge

from pyccm.provider.errors import ConfigError
from pyccm.provider.interface import Capability, ConfigChange, ReloadableCloud

log = logging.getLogger(__name__)

RELOADS = Counter(
    "pyccm_cloud_config_reloads_total",
    "Reloads of the cloud configuration that changed a setting (success) or were refused "
    "(failure), per worker process.",
    ["controller", "result"],
)
# "mostrecent": a restarted worker's new value wins over the one its dead predecessor left
# in the multiprocess directory.
LAST_SUCCESSFUL = Gauge(
    "pyccm_cloud_config_last_reload_successful",
    "1 when the cloud configuration file in place is the one in force; 0 after a refused "
    "reload, until a usable file is in place.",
    ["controller"],
    multiprocess_mode="mostrecent",
)
LAST_SUCCESS = Gauge(
    "pyccm_cloud_config_last_reload_success_timestamp_seconds",
    "When the cloud configuration in force was loaded (at start, or by a reload).",
    ["controller"],
    multiprocess_mode="mostrecent",
)

Wake = Callable[[frozenset[Capability]], None]


def describe(change: ConfigChange) -> str:
    """The INFO line of a reload that changed something."""
    sections = ", ".join(f"[{name}]" for name in change.sections)
    line = f"cloud config {change.source} reloaded: {sections} changed"
    if change.need_restart:
        line += f"; {', '.join(change.need_restart)} takes effect at the next restart"
    return line


class ConfigReloader:
    """Polls one cloud's configuration on its own thread; `request()` asks for a check now."""

    def __init__(
        self,
        *,
        cloud: ReloadableCloud,
        controller: str,
        period: float,
        wake: Wake,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._cloud = cloud
        self._controller = controller
        # 0: no polling; SIGHUP still reloads.
        self._period = period
        self._wake = wake
        self._clock = clock
        self._now = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        LAST_SUCCESSFUL.labels(controller=controller).set(1)
        LAST_SUCCESS.labels(controller=controller).set(clock())

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"{self._controller}-cloud-config", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._now.set()

    def request(self) -> None:
        """Check now (SIGHUP). Only sets an event: safe from a signal handler."""
        self._now.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._now.wait(self._period if self._period > 0 else None)
            self._now.clear()
            if not self._stopping.is_set():
                self.check()

    def check(self) -> None:
        """One look at the configuration; never raises."""
        try:
            change = self._cloud.reload_config()
        except ConfigError as error:
            self._refused(f"{error}")
            return
        except Exception as error:  # a bug must not stop the polling; its type only
            self._refused(f"unexpected {type(error).__name__}")
            return
        if change is None:
            return
        LAST_SUCCESSFUL.labels(controller=self._controller).set(1)
        if not change.sections:
            log.debug("cloud config %s changed but no setting did", change.source)
            return
        RELOADS.labels(controller=self._controller, result="success").inc()
        LAST_SUCCESS.labels(controller=self._controller).set(self._clock())
        log.info("%s", describe(change))
        if change.capabilities:
            self._wake(change.capabilities)

    def _refused(self, why: str) -> None:
        RELOADS.labels(controller=self._controller, result="failure").inc()
        LAST_SUCCESSFUL.labels(controller=self._controller).set(0)
        log.warning("cloud config not reloaded, the settings in force stay: %s", why)
