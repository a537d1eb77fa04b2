"""Every controller a worker process can run, by canonical name: its spec (runtime/spec.py),
each in its controller's package."""

from __future__ import annotations

from collections.abc import Mapping

from pyccm.workers.lifecycle.spec import SPEC as LIFECYCLE
from pyccm.workers.node.spec import SPEC as NODE
from pyccm.workers.route.spec import SPEC as ROUTE
from pyccm.workers.runtime.spec import ControllerSpec
from pyccm.workers.service.spec import SPEC as SERVICE

# One per controller the manager knows (protocol.controllers.CONTROLLERS), in its order.
SPECS: Mapping[str, ControllerSpec] = {s.name: s for s in (NODE, LIFECYCLE, SERVICE, ROUTE)}
