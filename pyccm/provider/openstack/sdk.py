"""Small shims around openstacksdk quirks, in one place so they are easy to drop later."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_config_warnings() -> Iterator[None]:
    """Silence openstacksdk's own `RemovedInSDK60Warning` while it builds a cloud region.

    openstacksdk 4.x warns about InfluxDB support on every `CloudRegion` it builds, even
    with no InfluxDB configured (its loader always passes a dict of Nones). The warning is
    about the library's internals, not about anything pyccm does, and under the tests'
    `filterwarnings = error` it would turn every connection into a failure. Only called at
    start-up, from one thread, so `catch_warnings` is safe here.
    """
    from openstack import warnings as sdk_warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sdk_warnings.RemovedInSDK60Warning)
        yield
