"""The built image, run with buildah: a container made from the OCI archive `make image`
saved, and commands run in it as the image says (its user, environment, working directory,
command), with `buildah run --isolation chroot`: the host's network and pid namespace, so
the simulators started outside are reached on 127.0.0.1 and the container's processes are
seen in the host's /proc.

buildah ends only its own child when it is signalled (with SIGKILL: supervisord would
leave its workers behind), so `started` stops a command as a pod's runtime does (SIGTERM
to the image's command, its process 1), and then kills whatever it had started that is
still running: a failing or interrupted test leaves no process behind. A test process
killed outright leaves none either: `buildah run` is tied to it (pyccm.lifetime: SIGTERM
when it dies, and buildah then kills the command), and the tree's programs to supervisord
(PYCCM_TIED_TO). The container is removed at the end of `container`, or by the next run
when the test process was killed.

One thing runc does that buildah's chroot does not: runc gives the container's standard
input, output and error to the image's user before it drops to that user (its
fixStdioPermissions), so a process may open /dev/stdout again, as supervisord does for
every program (`stdout_logfile=/dev/stdout`). buildah's are root's pipes (mode 0600): the
user gets EACCES. So `started` runs `RUNC_INIT` as root in the container, which does just
that, drops to the image's user (uid, gid, no supplementary groups, no capabilities left)
and execs the command.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pyccm import lifetime
from pyccm_sim.demo import World
from pyccm_sim.scenario import CLUSTER_CIDR
from tests.support.logs import manager_get
from tests.support.processes import PROC, Proc, descendants, kill_all, long_lived, survivors
from tests.support.waiting import wait_for

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
ARCHIVE = Path(os.environ.get("PYCCM_IMAGE_ARCHIVE", REPO / "build" / "pyccm-image.oci.tar"))
# buildah's own processes between `buildah run` and the command (chroot isolation).
BUILDAH_PROCESSES = ("buildah", "buildah-chroot-runtime", "buildah-chroot-exec")
# runc's last steps before the image's command, run with the image's python3 as root:
# argv[1] and argv[2] are the uid and gid, the rest the command.
# It also names itself (the pid the command keeps) in PYCCM_TIED_TO, as `pyccm tree` does:
# the tree's pyccm processes then die with supervisord should it be killed outright.
RUNC_INIT = (
    "import os, sys; uid, gid = int(sys.argv[1]), int(sys.argv[2]); "
    "[os.fchown(fd, uid, gid) for fd in (0, 1, 2)]; "
    "os.setgroups([]); os.setgid(gid); os.setuid(uid); "
    f"os.environ['{lifetime.TIED_TO_ENV}'] = str(os.getpid()); "
    "os.execvp(sys.argv[3], sys.argv[3:])"
)
# The names of the containers made here: the prefix, then the test process's pid.
CONTAINER_PREFIX = "pyccm-image-test-"
# Where the manifests mount cloud.conf (a Secret's volume); the kubeconfig goes beside it.
CONFIG_DIR = "/etc/pyccm/cloud"
STARTUP = 180.0
# What the snapshot of a root file system leaves out: the kernel's and the mounts' trees.
NOT_THE_IMAGE = ("proc", "sys", "dev")


def buildah(*args: str, timeout: float = 600.0) -> str:
    done = subprocess.run(
        ["buildah", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"buildah {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done.stdout


@dataclass(frozen=True)
class ImageConfig:
    """The image's OCI config: what a container runtime runs and how."""

    user: str
    env: dict[str, str]
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    workdir: str

    @property
    def command(self) -> list[str]:
        """The image's own command: its entry point, then its CMD."""
        return [*self.entrypoint, *self.cmd]


@dataclass(frozen=True)
class Container:
    name: str
    rootfs: Path  # the container's root as the host sees it (`buildah mount`)
    config: ImageConfig

    def argv(
        self,
        args: Sequence[str],
        *,
        volumes: Sequence[tuple[Path, str, str]] = (),
        env: Mapping[str, str] | None = None,
        user: str = "",
    ) -> list[str]:
        """`buildah run` of `args` with the image's user (or `user`), environment and
        working directory; `volumes` are (host path, container path, "ro" or "rw")."""
        command = ["buildah", "run", "--isolation", "chroot"]
        if user:
            command += ["--user", user]
        for source, destination, mode in volumes:
            command += ["--volume", f"{source}:{destination}:{mode}"]
        for key, value in (env or {}).items():
            command += ["--env", f"{key}={value}"]
        return [*command, self.name, "--", *args]

    def run(
        self,
        args: Sequence[str],
        *,
        volumes: Sequence[tuple[Path, str, str]] = (),
        env: Mapping[str, str] | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(args, volumes=volumes, env=env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def image_config(name: str) -> ImageConfig:
    info = json.loads(buildah("inspect", "--type", "container", name))
    config = info["OCIv1"]["config"]
    env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
    return ImageConfig(
        user=config.get("User", ""),
        env=env,
        entrypoint=tuple(config.get("Entrypoint") or ()),
        cmd=tuple(config.get("Cmd") or ()),
        workdir=config.get("WorkingDir", "/"),
    )


@contextmanager
def container(archive: Path = ARCHIVE) -> Iterator[Container]:
    """A container of the image in `archive`, mounted; removed afterwards."""
    if not archive.is_file():
        raise AssertionError(f"no image archive at {archive}: run `make image` first")
    remove_stale_containers()
    name = f"{CONTAINER_PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
    buildah("from", "--quiet", "--name", name, f"oci-archive:{archive}")
    try:
        rootfs = Path(buildah("mount", name).strip())
        yield Container(name=name, rootfs=rootfs, config=image_config(name))
    finally:
        with suppress(AssertionError):
            buildah("umount", name)
        buildah("rm", name)


def remove_stale_containers() -> None:
    """The containers of test processes that are gone (killed outright: their `finally`
    did not run), named by their pid."""
    listed = buildah("containers", "--noheading", "--format", "{{.ContainerName}}")
    for name in listed.split():
        pid = name.removeprefix(CONTAINER_PREFIX).split("-", 1)[0]
        if name.startswith(CONTAINER_PREFIX) and pid.isdigit() and not _alive(int(pid)):
            with suppress(AssertionError):
                buildah("rm", name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Started:
    """A command running in a container: `buildah run`'s process and the log both write."""

    run: subprocess.Popen[bytes]
    log: Path

    def command_process(self) -> Proc | None:
        """The image's command itself (the container's process 1), once started."""
        inside = descendants(self.run.pid)
        helpers = {p.pid for p in inside if _program(p) in BUILDAH_PROCESSES}
        for proc in inside:
            if _program(proc) not in BUILDAH_PROCESSES and parent(proc.pid) in helpers:
                return proc
        return None

    def processes(self) -> list[Proc]:
        """Every process the command started, itself included (not buildah's)."""
        return sorted(
            (
                p
                for p in long_lived(descendants(self.run.pid))
                if _program(p) not in BUILDAH_PROCESSES
            ),
            key=lambda p: p.pid,
        )


# A tree's process as supervisord.conf names its programs: supervisord, the manager, a worker.
PROGRAM = re.compile(r"/(supervisord) |/pyccm (manager|worker \S+)(?: --shard=(\S+))? ")


def program(command: str) -> str:
    """`supervisord`, `manager`, `worker service 0/1`, ...: what a process of the tree is,
    from its command line."""
    found = PROGRAM.search(f"{command} ")
    if found is None:
        return command
    return " ".join(part for part in found.groups() if part)


def _program(proc: Proc) -> str:
    return os.path.basename(proc.command.split(" ", 1)[0])


def parent(pid: int) -> int:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return int(text.rpartition(")")[2].split()[1])


@contextmanager
def started(
    box: Container,
    args: Sequence[str],
    *,
    log: Path,
    volumes: Sequence[tuple[Path, str, str]] = (),
    env: Mapping[str, str] | None = None,
    grace: float = 30.0,
) -> Iterator[Started]:
    """`args` running in `box` until the block ends; then stopped (see the module's doc)."""
    uid, _, gid = box.config.user.partition(":")
    if not (uid.isdigit() and gid.isdigit()):
        raise AssertionError(f"the image's USER {box.config.user!r} is not uid:gid")
    as_runc = ["python3", "-c", RUNC_INIT, uid, gid, *args]
    with log.open("ab") as out:
        # Tied to this process (pyccm.lifetime): should it die outright, buildah gets
        # SIGTERM and kills the command, whose programs are tied to it in turn.
        run = lifetime.spawn(
            box.argv(as_runc, volumes=volumes, env=env, user="0:0"), stdout=out, stderr=out
        )
    handle = Started(run=run, log=log)
    try:
        yield handle
    finally:
        stop(handle, grace=grace)


def stop(handle: Started, *, grace: float = 30.0) -> list[str]:
    """SIGTERM to the command, up to `grace` seconds for it (and `buildah run`) to end, then
    SIGKILL to anything it started that is still running. Returns those that had to be
    killed (their command lines): empty when the command stopped its own children."""
    run = handle.run
    inside = descendants(run.pid)  # everything it started, recorded before any signal
    top = handle.command_process()
    if top is not None and top.running():
        with suppress(ProcessLookupError):
            os.kill(top.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and (run.poll() is None or survivors(inside)):
        time.sleep(0.1)
    left = survivors(inside)
    kill_all(inside)
    lifetime.stop(run, timeout=grace)
    return left


@dataclass(frozen=True)
class Entry:
    kind: str  # "file", "dir", "link", "other"
    mode: int
    owner: tuple[int, int]
    size: int
    mtime_ns: int
    content: str  # a file's SHA-256, a link's target


def snapshot(root: Path, *, skip: Sequence[str] = ()) -> dict[str, Entry]:
    """Every path under `root` (as /path) with its type, mode, owner, size, modification
    time and content hash; `skip` names container paths left out with all below them."""
    left_out = {f"/{name}" for name in NOT_THE_IMAGE} | {s.rstrip("/") for s in skip}
    entries: dict[str, Entry] = {}
    for directory, dirs, files in os.walk(root):
        inside = "/" + os.path.relpath(directory, root).lstrip(".")
        inside = "/" if inside == "/" else inside.rstrip("/")
        dirs[:] = [d for d in dirs if _join(inside, d) not in left_out]
        for name in [*dirs, *files]:
            path = _join(inside, name)
            if path in left_out:
                entries[path] = _entry(Path(directory, name), content=False)
                continue
            entries[path] = _entry(Path(directory, name), content=True)
    return entries


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def _entry(path: Path, *, content: bool) -> Entry:
    info = path.lstat()
    owner = (info.st_uid, info.st_gid)
    if stat.S_ISLNK(info.st_mode):
        return Entry("link", info.st_mode, owner, 0, info.st_mtime_ns, os.readlink(path))
    if stat.S_ISDIR(info.st_mode):
        return Entry("dir", info.st_mode, owner, 0, info.st_mtime_ns, "")
    if not stat.S_ISREG(info.st_mode):
        return Entry("other", info.st_mode, owner, 0, info.st_mtime_ns, "")
    digest = ""
    if content:
        with path.open("rb") as data:
            digest = hashlib.file_digest(data, "sha256").hexdigest()
    return Entry("file", info.st_mode, owner, info.st_size, info.st_mtime_ns, digest)


def changes(before: dict[str, Entry], after: dict[str, Entry]) -> dict[str, str]:
    """What differs between two snapshots: path -> added, removed or changed."""
    found = dict.fromkeys(after.keys() - before.keys(), "added")
    found |= dict.fromkeys(before.keys() - after.keys(), "removed")
    found |= {p: "changed" for p in before.keys() & after.keys() if before[p] != after[p]}
    return dict(sorted(found.items()))


def writable_by(entries: dict[str, Entry], uid: int, gid: int) -> list[str]:
    """The directories of a snapshot that `uid` may create files in: world-writable ones
    (/tmp, /var/tmp, /run/lock), and those the user or its group owns and may write."""
    found = []
    for path, entry in entries.items():
        if entry.kind != "dir":
            continue
        owner, group = entry.owner
        if (
            entry.mode & 0o002
            or (owner == uid and entry.mode & 0o200)
            or (group == gid and entry.mode & 0o020)
        ):
            found.append(path)
    return sorted(found)


@dataclass(frozen=True)
class Memory:
    pid: int
    command: str
    rss_kb: int
    pss_kb: int


def memory(procs: Sequence[Proc]) -> list[Memory]:
    """Rss and Pss of each process from /proc/PID/smaps_rollup (kB, as the kernel counts)."""
    found = []
    for proc in procs:
        try:
            text = (PROC / str(proc.pid) / "smaps_rollup").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = {
            line.split(":")[0]: int(line.split()[1])
            for line in text.splitlines()[1:]
            if line.split(":")[0] in ("Rss", "Pss")
        }
        found.append(Memory(proc.pid, proc.command, fields["Rss"], fields["Pss"]))
    return found


def credentials(pid: int) -> tuple[str, str, str, str]:
    """A process's uids, gids (real, effective, saved, file system), supplementary groups
    and effective capabilities, as /proc/PID/status shows them."""
    status = dict(
        line.split(":", 1) for line in (PROC / str(pid) / "status").read_text().splitlines()
    )
    return (
        " ".join(status["Uid"].split()),
        " ".join(status["Gid"].split()),
        status["Groups"].strip(),
        status["CapEff"].strip(),
    )


@dataclass(frozen=True)
class Pod:
    """The image run as the manifests run it: its volumes (host directory, container path,
    mode) and the manager's port."""

    volumes: list[tuple[Path, str, str]]
    runtime: Path  # mounted at PYCCM_RUNTIME_DIR, writable, the user's (an emptyDir)
    config: Path  # mounted at CONFIG_DIR, read-only: cloud.conf and a kubeconfig
    port: int
    uid: int
    gid: int


def pod(box: Container, workdir: Path, *, port: int) -> Pod:
    """The volumes for a run of `box` on a read-only root: PYCCM_RUNTIME_DIR and the
    config as the manifests mount them, and every other directory of the image the user
    could write in (/tmp, /var/tmp, /run/lock: world-writable) covered by an empty
    read-only volume, as readOnlyRootFilesystem makes them."""
    user, _, group = box.config.user.partition(":")
    uid, gid = int(user), int(group)
    runtime_dir = box.config.env["PYCCM_RUNTIME_DIR"]
    runtime, config, empty = workdir / "run", workdir / "config", workdir / "empty"
    runtime.mkdir(mode=0o700)
    shutil.chown(runtime, uid, gid)
    config.mkdir(mode=0o755)
    empty.mkdir(mode=0o755)
    volumes = [
        (empty, path, "ro")
        for path in writable_by(snapshot(box.rootfs), uid, gid)
        if path != runtime_dir and not path.startswith(runtime_dir + "/")
    ]
    volumes += [(runtime, runtime_dir, "rw"), (config, CONFIG_DIR, "ro")]
    return Pod(volumes, runtime, config, port, uid, gid)


@contextmanager
def tree_in_image(
    box: Container, world: World, where: Pod, *, log: Path, manager_args: str = ""
) -> Iterator[Started]:
    """The image's own command (supervisord and the tree) on `world`'s simulators, with the
    values the manifests set for a cluster (the rest is the image's ENV), once the
    manager's /readyz answers; stopped at the end (`started`)."""
    for source, name in ((world.kubeconfig, "kubeconfig"), (world.cloud_conf, "cloud.conf")):
        shutil.copy(source, where.config / name)
        shutil.chown(where.config / name, where.uid, where.gid)
        (where.config / name).chmod(0o400)
    env = {
        "PYCCM_KUBECONFIG": f"{CONFIG_DIR}/kubeconfig",
        "PYCCM_CLOUD_CONFIG": f"{CONFIG_DIR}/cloud.conf",
        "PYCCM_CLUSTER_CIDR": CLUSTER_CIDR,
        "PYCCM_MANAGER_ARGS": f"--bind-address=127.0.0.1 --secure-port={where.port} "
        f"--leader-elect-retry-period=0.5 {manager_args}",
    }
    with started(box, box.config.command, log=log, volumes=where.volumes, env=env) as tree:
        wait_for(
            watching(tree, lambda: ready(where.port)),
            timeout=STARTUP,
            what=f"the manager's /readyz answers 200 (log: {log})",
        )
        yield tree


def watching(tree: Started, probe: Callable[[], T]) -> Callable[[], T]:
    """`probe`, failing at once (with the log's end) if the image's command has ended."""

    def watched() -> T:
        if tree.run.poll() is not None:
            tail = tree.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"the image's command ended (exit {tree.run.returncode}):\n{tail}")
        return probe()

    return watched


def ready(port: int) -> bool:
    try:
        status, _ = manager_get(port, "/readyz")
    except OSError:
        return False
    return status == 200
