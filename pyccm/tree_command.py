"""`pyccm tree`: the production process tree, the manager and one process per controller,
under supervisord, with every optional setting defaulted.

supervisord.conf reads its settings from the environment (`%(ENV_PYCCM_...)s`), and
supervisord refuses to start while any of them is unset, optional or not ("Format string
... cannot be expanded"). This command takes each setting from its flag, else from its
environment variable, else from its default; a missing required one is one line naming it
(exit 2). It then execs supervisord on supervisord.conf with the settings in its
environment. supervisord keeps this process's pid: what signals the command (a container
runtime, the demo) signals supervisord itself, which stops its programs on SIGTERM or
SIGINT, and a parent-death signal given to this process (`pyccm.lifetime`) survives the
exec. Its programs die with it too, should it be killed outright (`PYCCM_TIED_TO`).

`supervisord -c supervisord.conf` still works with the environment set in full (the
image's ENV and the manifests in deploy/ do so).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from pyccm import lifetime
from pyccm.flags.addresses import DEFAULT_RUNTIME_DIR
from pyccm.flags.cluster_id import ENV as CLUSTER_ID_ENV
from pyccm.flags.cluster_id import add_cluster_id_flag
from pyccm.logs import ENV as LOG_FORMAT_ENV
from pyccm.logs import add_log_format_flag

CONFIG = "supervisord.conf"
# A checkout's supervisord.conf, beside the package (an installed wheel has none there).
CHECKOUT_CONFIG = Path(__file__).resolve().parent.parent / CONFIG


def _beside_python(name: str) -> str:
    """The console script `name` of this Python's environment, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which(name) or ""


@dataclass(frozen=True)
class Setting:
    env: str
    flag: str
    help: str
    # None: required. A callable computes it from the settings resolved before it.
    default: str | Callable[[Mapping[str, str]], str] | None = ""

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


# In the order they are resolved (a computed default reads the ones above it).
SETTINGS = (
    Setting("PYCCM_CLOUD_CONFIG", "--cloud-config", "the workers' cloud.conf (required)", None),
    Setting(
        "PYCCM_KUBECONFIG",
        "--kubeconfig",
        "kubeconfig for the manager (default: in-cluster configuration)",
    ),
    Setting(
        "PYCCM_RUNTIME_DIR",
        "--runtime-dir",
        "0700 directory for the bus's ipc sockets, the metrics files and supervisord's "
        f"socket and pid file, made if missing (default {DEFAULT_RUNTIME_DIR})",
        DEFAULT_RUNTIME_DIR,
    ),
    Setting(
        "PYCCM_CLUSTER_NAME",
        "--cluster-name",
        "the cluster's name in its cloud resources' names (default kubernetes)",
        "kubernetes",
    ),
    Setting(
        "PYCCM_CONTROLLERS",
        "--controllers",
        "controllers whose workers the manager expects (default *)",
        "*",
    ),
    Setting(
        "PYCCM_SERVICE_SHARDS",
        "--service-shards",
        "service worker processes, --shard i/n each (default 1)",
        "1",
    ),
    Setting(
        "PYCCM_CLUSTER_CIDR",
        "--cluster-cidr",
        "the route worker's --cluster-cidr (default empty: the route controller is disabled, "
        "with one error line in its log)",
    ),
    Setting("PYCCM_MANAGER_ARGS", "--manager-args", "extra manager flags, one string"),
    Setting("PYCCM_WORKER_ARGS", "--worker-args", "extra flags for every worker, one string"),
    Setting(
        "PYCCM_BIN",
        "--pyccm-bin",
        "the pyccm executable supervisord runs (default: the one beside this Python)",
        lambda _: _beside_python("pyccm"),
    ),
    Setting(
        "PROMETHEUS_MULTIPROC_DIR",
        "--metrics-dir",
        "where every process writes its metrics, made if missing (default RUNTIME_DIR/metrics)",
        lambda resolved: str(Path(resolved["PYCCM_RUNTIME_DIR"]) / "metrics"),
    ),
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "tree",
        help="run the production process tree under supervisord, defaults filled in",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Each flag overrides its environment variable: "
        + ", ".join(f"{s.flag} ${s.env}" for s in SETTINGS)
        + ". Exit codes: supervisord's once it runs; 2 for a missing or bad setting.",
    )
    for setting in SETTINGS:
        parser.add_argument(setting.flag, default=None, help=setting.help)
    add_cluster_id_flag(parser)
    add_log_format_flag(parser)
    parser.add_argument(
        "--config",
        default=None,
        help=f"the supervisord configuration (default ./{CONFIG}, else the checkout's)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the settings supervisord would get, NAME=value a line, and exit",
    )
    parser.set_defaults(run=run)


class BadSetting(Exception):
    """One line for the operator: what is missing or wrong, and which variable or flag."""


def resolve(flags: Mapping[str, str | None], environ: Mapping[str, str]) -> dict[str, str]:
    """Every setting from its flag, else its environment variable, else its default."""
    resolved: dict[str, str] = {}
    for setting in SETTINGS:
        value = flags.get(setting.dest)
        if value is None:
            value = environ.get(setting.env)
        if setting.default is None and not value:
            raise BadSetting(f"{setting.env} is not set (or give {setting.flag})")
        if value is None:
            default = setting.default
            value = default(resolved) if callable(default) else str(default)
        resolved[setting.env] = value
    _check(resolved)
    return resolved


def _check(settings: Mapping[str, str]) -> None:
    cloud_config = settings["PYCCM_CLOUD_CONFIG"]
    if not Path(cloud_config).is_file():
        raise BadSetting(f"PYCCM_CLOUD_CONFIG {cloud_config}: no such file")
    kubeconfig = settings["PYCCM_KUBECONFIG"]
    if kubeconfig and not Path(kubeconfig).is_file():
        raise BadSetting(f"PYCCM_KUBECONFIG {kubeconfig}: no such file")
    shards = settings["PYCCM_SERVICE_SHARDS"]
    if not shards.isdigit() or int(shards) < 1:
        raise BadSetting(f"PYCCM_SERVICE_SHARDS {shards!r}: not a positive integer")
    if not settings["PYCCM_BIN"]:
        raise BadSetting("PYCCM_BIN is not set and no pyccm executable was found")


def _config(given: str | None) -> Path:
    if given is not None:
        path = Path(given)
    elif Path(CONFIG).is_file():
        path = Path(CONFIG).resolve()
    else:
        path = CHECKOUT_CONFIG
    if not path.is_file():
        raise BadSetting(f"{path}: no such supervisord configuration (give --config)")
    return path


def _make_directories(settings: Mapping[str, str]) -> None:
    for name in ("PYCCM_RUNTIME_DIR", "PROMETHEUS_MULTIPROC_DIR"):
        try:
            Path(settings[name]).mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise BadSetting(f"{name} {settings[name]}: {error.strerror}") from None


def run(args: argparse.Namespace) -> int:
    try:
        settings = resolve(vars(args), os.environ)
        config = _config(args.config)
        supervisord = _beside_python("supervisord")
        if not supervisord:
            raise BadSetting("no supervisord executable beside this Python or on PATH")
        if not args.dry_run:
            _make_directories(settings)
    except BadSetting as error:
        print(f"pyccm tree: {error}", file=sys.stderr)
        return 2
    settings[LOG_FORMAT_ENV] = args.log_format
    if args.cluster_id:
        settings[CLUSTER_ID_ENV] = args.cluster_id
    if args.dry_run:
        for name, value in settings.items():
            print(f"{name}={value}")
        return 0
    return _become(supervisord, config, settings)


def _become(supervisord: str, config: Path, settings: Mapping[str, str]) -> NoReturn:
    """This process becomes supervisord: same pid, same parent-death signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    # supervisord keeps this pid: its programs (`pyccm` processes) die with it.
    tied = {lifetime.TIED_TO_ENV: str(os.getpid())}
    os.execve(supervisord, [supervisord, "-c", str(config)], {**os.environ, **settings, **tied})
