"""The image's size and the tree's memory inside it (`python -m bench.image`).

Reads the OCI archive `make image` saved (build/pyccm-image.oci.tar): its size, its layers
(compressed, as a registry stores them) and the root file system they make (apparent
sizes: the base, the venv and its largest packages). Then runs the image's own command
(supervisord and the whole tree) in a container of it, as tests/image does (buildah, uid
65532, read-only root, the manifests' volumes), against both simulators seeded with
`--nodes` nodes and `--services` LoadBalancer Services; once every node is initialized,
every Service has its ingress and every node its route, it waits `--settle` seconds and
reads each process's Rss and Pss from /proc/PID/smaps_rollup. Rss counts the pages a
process shares (the interpreter, the libraries) in every process; Pss divides them among
the processes sharing them, so the Pss sum is what the tree costs the node.

Needs root and buildah. Writes bench/results/image.md (or `--out`).
"""

from __future__ import annotations

import argparse
import json
import os
import tarfile
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyccm import lifetime
from pyccm.kubeapi.client import KubeClient, KubeSettings
from pyccm_sim.demo import CloudView, converged_state, simulators
from tests.image.container import (
    ARCHIVE,
    Container,
    Memory,
    container,
    memory,
    pod,
    program,
    snapshot,
    tree_in_image,
    watching,
)
from tests.support.ports import free_port
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parent.parent
MB = 1_000_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=ARCHIVE)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--services", type=int, default=5)
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after converging")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "image.md")
    args = parser.parse_args()
    lifetime.stop_on_signals()  # SIGTERM or Ctrl-C: the container and simulators stop too
    layers = archive_layers(args.archive)
    with container(args.archive) as box:
        files = root_sizes(box)
        started = time.monotonic()
        rows, converge_s = tree_memory(box, args)
        print(f"converged in {converge_s:.1f} s ({time.monotonic() - started:.0f} s in all)")
    report = render(args, layers, files, rows, converge_s)
    args.out.write_text(report)
    print(report)
    return 0


def archive_layers(archive: Path) -> list[dict[str, Any]]:
    """The image's layers in the archive: compressed size and the step that made each."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> Any:
            member = tar.extractfile(f"blobs/{digest.replace(':', '/')}")
            assert member is not None
            return json.load(member)

        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest = blob(index["manifests"][0]["digest"])
        config = blob(manifest["config"]["digest"])
    steps = [
        step(h.get("created_by", "")) for h in config.get("history", []) if not h.get("empty_layer")
    ]
    return [
        {"size": layer["size"], "step": step}
        for layer, step in zip(manifest["layers"], steps, strict=False)
    ]


def step(created_by: str) -> str:
    """A layer's Containerfile step as its history says it; a base's own layers have none."""
    command = created_by.removeprefix("/bin/sh -c ").removeprefix("#(nop) ").strip()
    return command if command and command != "/bin/sh" else "the runtime base (RUNTIME_IMAGE)"


def root_sizes(box: Container) -> dict[str, int]:
    """Apparent bytes of the regular files of the container's root, by part."""
    sizes: dict[str, int] = defaultdict(int)
    site = "/app/.venv/lib/python3.11/site-packages/"
    for path, entry in snapshot(box.rootfs).items():
        if entry.kind != "file":
            continue
        sizes["total"] += entry.size
        if path.startswith("/app/.venv/"):
            sizes["venv"] += entry.size
            if path.startswith(site):
                top = path[len(site) :].split("/", 1)[0]
                sizes[f"package {top}"] += entry.size
        elif path.startswith("/app/"):
            sizes["app"] += entry.size
        else:
            sizes["base"] += entry.size
    return dict(sizes)


def tree_memory(box: Container, args: argparse.Namespace) -> tuple[list[Memory], float]:
    workdir = Path(tempfile.mkdtemp(prefix="pyccm-bench-image-"))
    os.chmod(workdir, 0o755)
    with ExitStack() as stack:
        world = stack.enter_context(
            simulators(workdir, nodes=args.nodes, services=args.services, latency=0)
        )
        where = pod(box, workdir, port=free_port())
        started = time.monotonic()
        tree = stack.enter_context(tree_in_image(box, world, where, log=workdir / "container.log"))
        kube = KubeClient(settings=KubeSettings(kubeconfig=str(world.kubeconfig)))
        stack.callback(kube.close)
        cloud = CloudView(world.cloud_url)
        wait_for(
            watching(
                tree,
                lambda: converged_state(kube, cloud).done(nodes=args.nodes, services=args.services),
            ),
            timeout=args.timeout,
            what=f"the tree converges (log: {workdir / 'container.log'})",
            poll=0.5,
        )
        converge_s = time.monotonic() - started
        time.sleep(args.settle)
        rows = memory(tree.processes())
    return rows, converge_s


def render(
    args: argparse.Namespace,
    layers: list[dict[str, Any]],
    files: dict[str, int],
    rows: list[Memory],
    converge_s: float,
) -> str:
    archive = args.archive.stat().st_size
    packages = sorted(
        ((k.removeprefix("package "), v) for k, v in files.items() if k.startswith("package ")),
        key=lambda kv: -kv[1],
    )[:8]
    lines = [
        "# The image: size and the tree's memory (`python -m bench.image`)",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, one run on the shared 2-core machine; "
        "the image `make image` built on the local Debian 12 bases (deploy/image/README.md).",
        "",
        "## Size",
        "",
        f"- OCI archive `{args.archive.name}`: {archive / MB:.1f} MB "
        "(layers gzip-compressed, as a registry stores them)",
        f"- root file system (apparent size of its files): {files['total'] / MB:.1f} MB: "
        f"the base {files['base'] / MB:.1f} MB, /app/.venv {files['venv'] / MB:.1f} MB, "
        f"the rest of /app {files.get('app', 0) / MB:.2f} MB",
        "",
        "| layer (compressed) | MB | made by |",
        "| --- | ---: | --- |",
        *(
            f"| {i} | {layer['size'] / MB:.1f} | `{layer['step'][:90].replace('|', '/')}` |"
            for i, layer in enumerate(layers, 1)
        ),
        "",
        "Largest packages of the venv (apparent size, bytecode included):",
        "",
        "| package | MB |",
        "| --- | ---: |",
        *(f"| {name} | {size / MB:.1f} |" for name, size in packages),
        "",
        "## The tree's memory in the image",
        "",
        f"{args.nodes} nodes, {args.services} LoadBalancer Services (seeded), both simulators "
        f"outside the image; converged in {converge_s:.1f} s from the container's start; "
        f"read {args.settle:.0f} s later from /proc/PID/smaps_rollup.",
        "",
        "| process | Rss (MB) | Pss (MB) |",
        "| --- | ---: | ---: |",
        *(f"| {program(row.command)} | {mb(row.rss_kb)} | {mb(row.pss_kb)} |" for row in rows),
        f"| **sum** ({len(rows)} processes) | {mb(sum(r.rss_kb for r in rows))} "
        f"| {mb(sum(r.pss_kb for r in rows))} |",
        "",
        "Rss counts shared pages in every process that maps them; the Pss sum is the tree's "
        "own share of memory (what the pod's working set is made of).",
        "",
        "Re-run: `make image && sudo .venv/bin/python -m bench.image` "
        f"(`--nodes {args.nodes} --services {args.services}`; about a minute).",
        "",
    ]
    return "\n".join(lines)


def mb(kib: int) -> str:
    """/proc's kB (KiB) as MB."""
    return f"{kib * 1024 / MB:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
