"""`python -m pyccm.provider.openstack.transport.clouds`: one clouds.yaml entry, resolved by
openstacksdk's own loader in a short-lived child process (`child.py` carries the question
and the answer), so that openstacksdk (about 30 MiB of imports) is never resident in a
worker (docs/architecture.md#provider-http).

The question: `clouds_file` (`[Global] clouds-file`, or empty for openstacksdk's search:
`$OS_CLIENT_CONFIG_FILE`, the current directory, `~/.config/openstack`, `/etc/openstack`)
and `cloud` (`[Global] cloud`, or empty for `$OS_CLOUD`, else the cloud openstacksdk makes
of the `OS_*` variables when there are any, else the file's only cloud), and `top_level`
(the entry's keys outside `auth` that `cloud.conf` may take). The loader merges
`secure.yaml` (`$OS_CLIENT_SECURE_FILE`, then the same search path) into the entry, as
every OpenStack client does. The answer: the entry's `auth` and those top-level keys, and
the files read. Refusals are one line without any value of the files.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from pyccm.provider.openstack.transport.child import ChildError, serve


def main() -> int:
    return serve(resolve)


def resolve(question: dict[str, Any]) -> dict[str, Any]:
    from openstack import exceptions
    from openstack import warnings as sdk_warnings
    from openstack.config import loader

    files = [question["clouds_file"]] if question.get("clouds_file") else None
    wanted = question.get("cloud") or None
    with warnings.catch_warnings():
        # openstacksdk 4 warns about its own InfluxDB support on every cloud it builds.
        warnings.simplefilter("ignore", sdk_warnings.RemovedInSDK60Warning)
        try:
            # The environment as every OpenStack client reads it: $OS_CLOUD, and the files
            # $OS_CLIENT_CONFIG_FILE and $OS_CLIENT_SECURE_FILE name (the loader ignores all
            # three without load_envvars).
            config = loader.OpenStackConfig(config_files=files, load_envvars=True)
            if wanted and wanted not in config.get_cloud_names():
                raise ChildError(f"no cloud named {wanted!r} in clouds.yaml", retryable=False)
            region = config.get_one(cloud=wanted, validate=False)
        except exceptions.ConfigException as exc:
            raise ChildError(
                f"clouds.yaml is not usable ({type(exc).__name__})", retryable=False
            ) from None
    entry = dict(region.config)
    auth = {key: str(value) for key, value in (entry.get("auth") or {}).items() if value}
    top = {key: str(entry[key]) for key in question["top_level"] if entry.get(key)}
    found = (config.config_filename, config.secure_config_filename)
    return {"auth": auth, **top, "files": [name for name in found if name]}


if __name__ == "__main__":
    sys.exit(main())
