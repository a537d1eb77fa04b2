"""The image `make image` built, run (tier `image`: `make image-test`).

Its own command runs inside it with buildah (its user, environment and working directory):
`pyccm --version`; then its CMD, the whole supervisord tree, against both simulators
started outside from the repository's venv and reached over the host's network, until a
LoadBalancer Service has its ingress IP. Every process of the tree runs as uid 65532, and
nothing of the image's root changes at run time: everything written goes to
PYCCM_RUNTIME_DIR (a host directory mounted there, as the manifests mount an emptyDir).
The runtime holds no build tool, compiler or test dependency.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tomllib
from contextlib import ExitStack
from pathlib import Path

import pytest

from pyccm_sim.demo import simulators
from tests.image.container import (
    CONFIG_DIR,
    REPO,
    STARTUP,
    Container,
    changes,
    credentials,
    pod,
    program,
    snapshot,
    stop,
    tree_in_image,
    watching,
)
from tests.support.ports import free_port
from tests.support.tree import Cloud, Kube, ingress_ips, initialized
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.image, pytest.mark.timeout(900)]

NONROOT = 65532
# The programs supervisord.conf starts (one service shard), as their command lines say.
PROGRAMS = {
    *("supervisord", "manager", "worker cloud-node", "worker cloud-node-lifecycle"),
    *("worker service 0/1", "worker route"),
}
# Build and test tools: none may be in the runtime, in the venv, the system Python, the
# Debian packages or on the PATH. The dev group (pyproject.toml) is added to these.
# The simulators' distribution (in the dev group) and the server they alone use: what ships
# is the product.
FORBIDDEN_DISTRIBUTIONS = {"uv", "pip", "setuptools", "wheel", "hatchling", "pytest", "ruff"}
FORBIDDEN_DISTRIBUTIONS |= {"aiohttp", "multidict", "yarl"}
FORBIDDEN_PACKAGES = re.compile(
    r"^(gcc(-\d+)?|g\+\+(-\d+)?|cpp(-\d+)?|clang.*|make|binutils.*|build-essential|"
    r"libc6-dev|libc-dev-bin|linux-libc-dev|libpython3.*-dev|"
    r"python3(\.\d+)?-(dev|pip|setuptools|wheel|venv))$"
)
FORBIDDEN_PROGRAMS = {
    *("uv", "uvx", "pip", "pip3", "gcc", "cc", "c++", "g++", "cpp", "make", "ld", "as"),
    *("pytest", "ruff", "mypy", "dmypy", "lint-imports", "hatchling"),
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dev_group() -> set[str]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    specs = pyproject["dependency-groups"]["dev"]
    return {canonical(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in specs}


def in_image(image: Container, *args: str) -> str:
    """The output of a command run in the image through its entry point (it has none)."""
    for _ in range(3):
        done = image.run([*image.config.entrypoint, *args])
        assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        # Seen once on a loaded machine: exit 0 and no output at all, buildah's chroot
        # relay having lost it (`id -u`, which always prints). Asked again.
        if done.stdout:
            return done.stdout
    raise AssertionError(f"{args}: exit 0 and no output, three times")


def test_pyccm_says_its_version_as_the_images_user(image: Container) -> None:
    assert image.config.user == f"{NONROOT}:{NONROOT}"
    lines = in_image(image, "pyccm", "--version").splitlines()
    assert lines[0] == "pyccm 0.1.0"
    assert "provider openstack pyccm.provider.openstack:create_cloud" in lines
    assert in_image(image, "id", "-u").strip() == str(NONROOT)
    # Installed from the wheel into the venv; the image has no checkout of the sources.
    where = in_image(image, "python3", "-c", "import pyccm; print(pyccm.__file__)").strip()
    assert where.startswith("/app/.venv/lib/"), where
    assert not (image.rootfs / "app" / "pyccm").exists()


SOURCES = (
    "import hashlib, json, pathlib, pyccm; root = pathlib.Path(pyccm.__file__).parent; "
    "print(json.dumps({str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() "
    "for p in sorted(root.rglob('*.py'))}))"
)


def test_the_images_pyccm_is_the_checkouts(image: Container) -> None:
    """Every module of the checkout, byte for byte: a cached wheel of the same version
    must not stand in for changed sources (uv keys a local project's built wheel on
    pyproject.toml, not on its modules; the Containerfile refreshes it)."""
    root = REPO / "pyccm"
    checkout = {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }

    assert json.loads(in_image(image, "python3", "-c", SOURCES)) == checkout


DISTRIBUTIONS = (
    "import importlib.metadata as m, json, sys; "
    "print(json.dumps([sys.prefix, sorted(d.metadata['Name'] for d in m.distributions())]))"
)

BASE_PREFIX = "import sys, json; print(json.dumps(sys.base_prefix))"


def test_the_runtime_has_no_build_or_test_tool(image: Container) -> None:
    forbidden = FORBIDDEN_DISTRIBUTIONS | dev_group()
    # The venv: the locked runtime dependencies and pyccm, nothing else.
    prefix, names = json.loads(in_image(image, "python3", "-c", DISTRIBUTIONS))
    assert prefix == "/app/.venv"
    venv = {canonical(n) for n in names}
    assert {"pyccm", "openstacksdk", "supervisor"} <= venv
    assert venv & forbidden == set()
    assert venv - locked_runtime() == set(), "the venv holds what the lock does not"
    # The interpreter the venv runs on, with its own site-packages only.
    base = json.loads(in_image(image, "python3", "-c", BASE_PREFIX))
    _, system = json.loads(in_image(image, f"{base}/bin/python3", "-I", "-c", DISTRIBUTIONS))
    assert {canonical(n) for n in system} & forbidden == set()
    # The Debian packages (a Debian-based image), and every program on the image's PATH.
    if (image.rootfs / "usr/bin/dpkg-query").exists():
        packages = in_image(image, "dpkg-query", "-W", "-f", "${Package}\\n").split()
        assert packages, "dpkg-query listed nothing"
        assert [p for p in packages if FORBIDDEN_PACKAGES.match(p)] == []
    on_path = {
        entry.name
        for directory in image.config.env["PATH"].split(":")
        if (image.rootfs / directory.lstrip("/")).is_dir()
        for entry in (image.rootfs / directory.lstrip("/")).iterdir()
    }
    assert {"pyccm", "supervisord"} <= on_path
    assert on_path & FORBIDDEN_PROGRAMS == set()


def locked_runtime() -> set[str]:
    """The distributions uv.lock gives the runtime (no dev group), and pyccm."""
    uv = shutil.which("uv") or str(REPO / ".tools" / "bin" / "uv")
    exported = subprocess.run(
        [uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {
        canonical(re.split(r"[=<>!~; ]", line, maxsplit=1)[0])
        for line in exported.splitlines()
        if line and not line.startswith(("#", " "))
    }
    return names | {"pyccm"}


def test_the_image_command_runs_the_tree_as_its_user_on_a_read_only_root(
    image: Container, tmp_path: Path
) -> None:
    runtime_dir = image.config.env["PYCCM_RUNTIME_DIR"]
    where = pod(image, tmp_path, port=free_port())
    # What buildah's own run changes in the root (its mount points, /run): a no-op first.
    before_any = snapshot(image.rootfs, skip=[runtime_dir, CONFIG_DIR])
    assert image.run(["true"], volumes=where.volumes).returncode == 0
    before = snapshot(image.rootfs, skip=[runtime_dir, CONFIG_DIR])
    footprint = changes(before_any, before)
    with ExitStack() as stack:
        world = stack.enter_context(simulators(tmp_path, nodes=2, latency=0))
        log = tmp_path / "container.log"
        tree = stack.enter_context(tree_in_image(image, world, where, log=log))
        kube = Kube(world.kubeconfig)
        stack.callback(kube.client.close)
        wait_for(
            watching(tree, lambda: initialized(kube, ["node-0000", "node-0001"])),
            timeout=STARTUP,
            what=f"the tree initializes the nodes (log: {log})",
        )
        kube.create_service("web")
        (ip,) = wait_for(
            watching(tree, lambda: ingress_ips(kube.service("web"))),
            timeout=STARTUP,
            what=f"the Service gets its load balancer's ingress IP (log: {log})",
        )
        cloud = Cloud(world.cloud_url, world.cloud_conf.parent / "clouds.yaml")
        assert ip in {f["floating_ip_address"] for f in cloud.rows("floatingip")}
        # The whole tree runs as the image's user.
        procs = tree.processes()
        assert {program(p.command) for p in procs} == PROGRAMS, procs
        user = f"{NONROOT} {NONROOT} {NONROOT} {NONROOT}"
        assert {credentials(p.pid) for p in procs} == {(user, user, "", "0" * 16)}
        # SIGTERM to the image's command (process 1 in a pod) ends the whole tree.
        assert stop(tree) == []
    assert tree.run.returncode == 0, log.read_text()[-2000:]
    # It wrote where it may: supervisord's socket and pid file, the metrics files.
    assert any((where.runtime / "metrics").iterdir())
    # And nowhere else: the image's root is as it was, but for what buildah's own run of
    # `true` with the same volumes changed too.
    after = snapshot(image.rootfs, skip=[runtime_dir, CONFIG_DIR])
    assert {p: c for p, c in changes(before, after).items() if footprint.get(p) != c} == {}
