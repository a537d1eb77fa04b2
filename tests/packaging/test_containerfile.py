"""The Containerfile builds an image that runs the tree, checked without a container engine.

No engine runs here, so the builder stage's steps are replayed in a scratch directory that
stands in for the image's file system (`/app` and `/run/pyccm` map under it): its ENV and
WORKDIR, its COPY lines from the build context (minus `.dockerignore`), and its RUN lines
(the `uv sync` commands, run by the uv the image pins, with uv's cache standing in for the
cache mount). The runtime stage then keeps only what its COPY lines take from the builder,
and its ENV and CMD start supervisord against both simulators, as a pod would with the
manifests' values: the manager answers /readyz and the nodes get initialized. A wrong flag
in a RUN line, a missing COPY, or an ENV that supervisord.conf needs and the image lacks
fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from pyccm import lifetime
from pyccm_sim.demo import simulators
from pyccm_sim.scenario import CLUSTER_CIDR
from tests.packaging.containerfile import (
    Instruction,
    Stage,
    base_python,
    ignore_patterns,
    ignored,
    parse,
    stage,
    substitute,
)
from tests.support.logs import check_fields, manager_get
from tests.support.ports import free_port
from tests.support.tree import Kube, initialized
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
# The image's own directories: the scratch root stands in for them. Everything else a step
# names (/usr/local/bin/python3.11, /bin/sh) is the base image's, played by this machine.
IMAGE_DIRS = ("/app", "/run/pyccm")
# python:3.11-slim's PATH, which the runtime stage's `PATH=/app/.venv/bin:${PATH}` extends.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# uv's cache for root in the builder: the RUN lines' cache mount must be exactly there.
UV_CACHE_MOUNT = "type=cache,target=/root/.cache/uv"
NONROOT = "65532"
# supervisord's own lines: `2025-11-25 11:47:00,123 INFO spawned: 'manager' with pid 7`.
SUPERVISORD_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")
STARTUP = 90.0


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse((REPO / "Containerfile").read_text())


def makefile_uv_version() -> str:
    match = re.search(r"^UV_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert match, "the Makefile pins UV_VERSION"
    return match.group(1)


def uv_binary() -> Path:
    """The uv `make setup` uses, as the Makefile finds it."""
    found = shutil.which("uv")
    return Path(found) if found else REPO / ".tools" / "bin" / "uv"


class Scratch:
    """The image's file system as far as the test needs it: IMAGE_DIRS under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, container_path: str) -> Path:
        if not any(container_path == d or container_path.startswith(d + "/") for d in IMAGE_DIRS):
            raise AssertionError(f"{container_path} is outside the image's own directories")
        return self.root / container_path.lstrip("/")

    def expand(self, text: str) -> str:
        """Every mention of an image directory in a value or a command, mapped."""
        for directory in IMAGE_DIRS:
            pattern = re.escape(directory) + r"(?=/|\b|$)"
            text = re.sub(rf"(?<![\w/.]){pattern}", str(self.path(directory)), text)
        return text


def resolve(workdir: str, path: str) -> str:
    return str(PurePosixPath(workdir, path)) + ("/" if path.endswith("/") else "")


def copy_from_context(instruction: Instruction, workdir: str, scratch: Scratch) -> None:
    """COPY's semantics: a folder's contents go into the destination; a file goes into it
    when it ends with / (or there are several sources), else becomes it; symlinks stay
    symlinks; what .dockerignore names is not in the context."""
    *sources, destination = instruction.arguments
    patterns = ignore_patterns(REPO)
    target = resolve(workdir, destination)
    into = target.endswith("/") or len(sources) > 1
    for source in sources:
        relative = PurePosixPath(source.rstrip("/"))
        assert not ignored(relative, patterns), f"COPY {source}: .dockerignore excludes it"
        origin = REPO / relative
        assert origin.exists(), f"line {instruction.line}: COPY {source}: not in the context"
        if origin.is_dir() and not origin.is_symlink():
            _copy_tree(origin, scratch.path(target.rstrip("/")), relative, patterns)
        else:
            end = scratch.path(target.rstrip("/"))
            end = end / origin.name if into else end
            end.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, end, follow_symlinks=False)


def _copy_tree(origin: Path, end: Path, relative: PurePosixPath, patterns: list[str]) -> None:
    end.mkdir(parents=True, exist_ok=True)
    for entry in sorted(origin.iterdir()):
        inner = relative / entry.name
        if ignored(inner, patterns):
            continue
        if entry.is_dir() and not entry.is_symlink():
            _copy_tree(entry, end / entry.name, inner, patterns)
        else:
            shutil.copy2(entry, end / entry.name, follow_symlinks=False)


def is_uv_bootstrap(command: str) -> bool:
    return command.startswith("pip install") and "uv==" in command


def run_step(
    instruction: Instruction, stage_: Stage, env: dict[str, str], workdir: str, scratch: Scratch
) -> None:
    (command,) = instruction.arguments
    if "uv " in command:
        assert instruction.flags.get("mount") == UV_CACHE_MOUNT, instruction
    # The machine's environment (proxies, the package index), minus any virtual environment
    # the test runs in; the stage's ARGs and ENV on top; the image's Python is this one.
    inherited = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "UV_", "PYTHON", "PYCCM_"))
    }
    step_env = inherited | stage_.args | {k: scratch.expand(v) for k, v in env.items()}
    step_env["PATH"] = f"{uv_binary().parent}:{BASE_PATH}"
    step_env["UV_PYTHON"] = base_python()
    done = subprocess.run(
        ["/bin/sh", "-ec", scratch.expand(command)],
        cwd=scratch.path(workdir),
        env=step_env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (
        f"Containerfile line {instruction.line}: {command}\n{done.stdout}\n{done.stderr}"
    )


def replay_builder(builder: Stage, scratch: Scratch) -> None:
    env: dict[str, str] = {}
    workdir = "/"
    for instruction in builder.instructions:
        match instruction.keyword:
            case "ENV":
                env = Stage(builder.base, builder.name, [instruction], builder.args).env(env)
            case "WORKDIR":
                workdir = resolve(workdir, instruction.arguments[0])
                scratch.path(workdir).mkdir(parents=True, exist_ok=True)
            case "COPY":
                assert not instruction.flags, f"builder COPY {instruction.flags}: not replayed"
                copy_from_context(instruction, workdir, scratch)
            case "RUN" if is_uv_bootstrap(instruction.arguments[0]):
                continue  # checked by test_the_builder_pins_the_uv_of_the_makefile
            case "RUN":
                run_step(instruction, builder, env, workdir, scratch)
            case _:
                raise AssertionError(f"the builder's {instruction.keyword} is not replayed")


def assemble_runtime(runtime: Stage, scratch: Scratch) -> None:
    """The runtime stage's file system: only what its COPY lines bring, at their paths."""
    builder = scratch.root.with_name("builder-root")
    scratch.root.rename(builder)
    scratch.root.mkdir()
    workdir = "/"
    for instruction in runtime.instructions:
        if instruction.keyword == "WORKDIR":
            workdir = resolve(workdir, instruction.arguments[0])
        if instruction.keyword != "COPY":
            continue
        if instruction.flags.get("from") == "builder":
            source, destination = instruction.arguments
            # Built and run at one path: a venv's scripts name their interpreter absolutely.
            assert source == destination, f"COPY --from=builder {source} {destination}"
            end = scratch.path(destination)
            end.parent.mkdir(parents=True, exist_ok=True)
            (builder / source.lstrip("/")).rename(end)
        else:
            assert not instruction.flags, instruction
            copy_from_context(instruction, workdir, scratch)
    shutil.rmtree(builder)
    # The runtime's RUN (as root) makes /run/pyccm for the user; the manifests mount it.
    scratch.path("/run/pyccm").mkdir(mode=0o700, parents=True)


@dataclass(frozen=True)
class Image:
    scratch: Scratch
    env: dict[str, str]  # the runtime stage's ENV, mapped
    workdir: Path
    command: list[str]  # CMD, mapped, its program found on the image's PATH


@pytest.fixture(scope="module")
def image(stages: list[Stage], tmp_path_factory: pytest.TempPathFactory) -> Image:
    scratch = Scratch(tmp_path_factory.mktemp("containerfile") / "root")
    scratch.root.mkdir()
    replay_builder(stage(stages, "builder"), scratch)
    runtime = stage(stages, "runtime")
    assemble_runtime(runtime, scratch)
    env = {k: scratch.expand(v) for k, v in runtime.env({"PATH": BASE_PATH}).items()}
    # The user has no home (useradd --home-dir /nonexistent): nothing may need one.
    env["HOME"] = str(scratch.root / "nonexistent")
    (cmd,) = runtime.all("CMD")
    program = shutil.which(cmd.arguments[0], path=env["PATH"])
    assert program, f"CMD {cmd.arguments[0]} is not on the image's PATH {env['PATH']}"
    return Image(
        scratch=scratch,
        env=env,
        workdir=scratch.path(runtime.workdir()),
        command=[program, *(scratch.expand(a) for a in cmd.arguments[1:])],
    )


def test_the_builder_pins_the_uv_of_the_makefile(stages: list[Stage]) -> None:
    builder = stage(stages, "builder")
    bootstraps = [i for i in builder.all("RUN") if is_uv_bootstrap(i.arguments[0])]
    assert len(bootstraps) == 1
    pinned = substitute(bootstraps[0].arguments[0], builder.args)
    assert f'"uv=={makefile_uv_version()}"' in pinned
    version = subprocess.run(
        [str(uv_binary()), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert version == makefile_uv_version(), "the test replays the steps with another uv"
    syncs = [i.arguments[0] for i in builder.all("RUN") if "uv sync" in i.arguments[0]]
    assert syncs
    assert all("--frozen" in s and "--no-dev" in s for s in syncs), syncs


def test_the_runtime_runs_supervisord_as_a_non_root_user(stages: list[Stage]) -> None:
    runtime = stage(stages, "runtime")
    assert runtime.base == stage(stages, "builder").base == "python:3.11-slim"
    assert [u.arguments for u in runtime.all("USER")] == [(f"{NONROOT}:{NONROOT}",)]
    (setup,) = runtime.all("RUN")
    assert f"--uid {NONROOT}" in setup.arguments[0]
    assert f"install -d -o {NONROOT} -g {NONROOT} -m 0700 /run/pyccm" in setup.arguments[0]
    (cmd,) = runtime.all("CMD")
    assert cmd.arguments == ("supervisord", "-c", "/app/supervisord.conf")
    env = runtime.env({"PATH": BASE_PATH})
    assert env["PYCCM_BIN"] == "/app/.venv/bin/pyccm"
    assert env["PYCCM_RUNTIME_DIR"] == "/run/pyccm"
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/run/pyccm/")


def test_the_image_sets_every_variable_supervisord_conf_reads(stages: list[Stage]) -> None:
    needed = set(re.findall(r"%\(ENV_(\w+)\)s", (REPO / "supervisord.conf").read_text()))
    assert needed, "supervisord.conf reads its settings from the environment"
    env = stage(stages, "runtime").env({"PATH": BASE_PATH})
    assert needed - set(env) == set()


@pytest.mark.e2e
def test_the_installed_pyccm_is_the_wheel_in_the_venv(image: Image) -> None:
    done = subprocess.run(
        [image.env["PYCCM_BIN"], "--version"],
        cwd=image.workdir,
        env=image.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "pyccm 0.1.0"
    assert "provider openstack pyccm.provider.openstack:create_cloud" in lines
    where = subprocess.run(
        [
            str(Path(image.env["PYCCM_BIN"]).with_name("python")),
            "-c",
            "import pyccm.manager.app, pyccm; print(pyccm.__file__)",
        ],
        cwd=image.workdir,
        env=image.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    # Installed, not a link to a checkout: the runtime stage has no sources.
    assert Path(where).is_relative_to(image.scratch.path("/app/.venv")), where
    assert not (image.workdir / "pyccm").exists()


@pytest.mark.e2e
def test_the_image_command_starts_the_tree(image: Image, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "container.log"
    with ExitStack() as stack:
        world = stack.enter_context(simulators(tmp_path, nodes=2, latency=0))
        # What the manifests set for a cluster (deploy/): its API, its cloud, its pod network.
        pod_env = image.env | {
            "PYCCM_KUBECONFIG": str(world.kubeconfig),
            "PYCCM_CLOUD_CONFIG": str(world.cloud_conf),
            "PYCCM_CLUSTER_CIDR": CLUSTER_CIDR,
            "PYCCM_MANAGER_ARGS": f"--bind-address=127.0.0.1 --secure-port={port} "
            "--leader-elect-retry-period=0.5",
            "PYCCM_LOG_FORMAT": "json",
        }
        with log.open("ab") as out:
            tree = lifetime.spawn(
                image.command, cwd=image.workdir, env=pod_env, stdout=out, stderr=out
            )
        stack.callback(lifetime.stop, tree, timeout=30)
        wait_for(
            lambda: _ready(port),
            timeout=STARTUP,
            what=f"the manager's /readyz answers 200 (log: {log})",
        )
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        wait_for(
            lambda: initialized(kube, ["node-0000", "node-0001"]),
            timeout=STARTUP,
            what="the tree initializes the nodes",
        )
    # PYCCM_LOG_FORMAT reached every process through supervisord: every line is JSON but
    # supervisord's own (its format is its own).
    lines = log.read_text().splitlines()
    assert [x for x in lines if not x.startswith("{") and not SUPERVISORD_LINE.match(x)] == []
    records = [json.loads(x) for x in lines if x.startswith("{")]
    assert "manager" in {r["process"] for r in records}
    for record in records:
        check_fields(record, process=record["process"])


def _ready(port: int) -> bool:
    try:
        status, _ = manager_get(port, "/readyz")
    except OSError:
        return False
    return status == 200
