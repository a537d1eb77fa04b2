"""`pyccm tree`: the production tree under supervisord with every optional
setting defaulted. `supervisord -c supervisord.conf` alone stops at the first unset
`PYCCM_*` ("Format string ... cannot be expanded"), optional ones included; the command
needs only the cloud config, and a missing or bad setting is one line naming it, exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pyccm import lifetime
from pyccm_sim.demo import simulators
from tests.support.processes import Proc, descendants, kill_all, long_lived, survivors
from tests.support.waiting import wait_for

SUPERVISORCTL = str(Path(sys.executable).parent / "supervisorctl")
PROGRAMS = {"manager", "worker-node", "worker-lifecycle", "worker-service-0", "worker-route"}


def bare_environment() -> dict[str, str]:
    """This environment without any PYCCM_* or PROMETHEUS_* variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYCCM_", "PROMETHEUS_"))}


def tree(*flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyccm", "tree", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env=bare_environment(),
        cwd=cwd,
        check=False,
        **lifetime.tied(),
    )


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        ((), "pyccm tree: PYCCM_CLOUD_CONFIG is not set (or give --cloud-config)"),
        (("--cloud-config=/nonexistent.conf",), "PYCCM_CLOUD_CONFIG /nonexistent.conf: no such"),
        (("--cloud-config=CLOUD", "--service-shards=0"), "PYCCM_SERVICE_SHARDS '0': not a"),
        (("--cloud-config=CLOUD", "--kubeconfig=/no/kubeconfig"), "PYCCM_KUBECONFIG /no/kube"),
    ],
)
def test_a_missing_or_bad_setting_is_one_line_naming_it(
    flags: tuple[str, ...], line: str, tmp_path: Path
) -> None:
    cloud = tmp_path / "cloud.conf"
    cloud.write_text("[Global]\n")
    done = tree(*(f.replace("CLOUD", str(cloud)) for f in flags), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("pyccm tree: "), done.stderr
    assert line in done.stderr, done.stderr


def test_the_defaults_fill_in_every_variable_supervisord_conf_reads(tmp_path: Path) -> None:
    cloud = tmp_path / "cloud.conf"
    cloud.write_text("[Global]\n")
    run = tmp_path / "run"
    done = tree(f"--cloud-config={cloud}", f"--runtime-dir={run}", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    settings = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert settings == {
        "PYCCM_CLOUD_CONFIG": str(cloud),
        "PYCCM_KUBECONFIG": "",
        "PYCCM_RUNTIME_DIR": str(run),
        "PYCCM_CLUSTER_NAME": "kubernetes",
        "PYCCM_CONTROLLERS": "*",
        "PYCCM_SERVICE_SHARDS": "1",
        "PYCCM_CLUSTER_CIDR": "",
        "PYCCM_MANAGER_ARGS": "",
        "PYCCM_WORKER_ARGS": "",
        "PYCCM_BIN": str(Path(sys.executable).parent / "pyccm"),
        "PROMETHEUS_MULTIPROC_DIR": str(run / "metrics"),
        "PYCCM_LOG_FORMAT": "text",
    }
    conf = (Path(__file__).resolve().parents[2] / "supervisord.conf").read_text()
    for name in settings:
        if name not in ("PYCCM_LOG_FORMAT", "PROMETHEUS_MULTIPROC_DIR"):  # in the environment
            assert f"%(ENV_{name})s" in conf, name  # the ones the file reads


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_the_tree_starts_with_the_cloud_config_alone_and_its_programs_end_with_it(
    signum: signal.Signals, tmp_path: Path
) -> None:
    """Against both simulators; --kubeconfig because the default is in-cluster, the others
    to run beside other tests. SIGTERM: supervisord stops its programs; SIGKILL: each of
    them gets SIGTERM from the kernel (they asked for it at start: PYCCM_TIED_TO)."""
    run = tmp_path / "run"
    with simulators(tmp_path, nodes=1, latency=0) as world:
        command = [sys.executable, "-m", "pyccm", "tree", f"--cloud-config={world.cloud_conf}"]
        command += [f"--kubeconfig={world.kubeconfig}", f"--runtime-dir={run}"]
        command += ["--manager-args=--secure-port=0"]  # not 10258: tests run side by side
        with (tmp_path / "tree.log").open("ab") as log:
            started = lifetime.spawn(
                command, env=bare_environment(), stdout=log, stderr=log, cwd=tmp_path
            )
        programs: set[Proc] = set()
        try:

            def status() -> dict[str, str]:
                done = subprocess.run(
                    [SUPERVISORCTL, f"--serverurl=unix://{run}/supervisor.sock", "status"],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    cwd=tmp_path,
                    check=False,
                )
                rows = (line.split() for line in done.stdout.splitlines())
                # `worker-service:worker-service-0`: a group's process is GROUP:NAME.
                return {row[0].split(":")[-1]: row[1] for row in rows if len(row) > 1}

            wait_for(
                lambda: (
                    {name for name, state in status().items() if state == "RUNNING"} == PROGRAMS
                ),
                timeout=60,
                what=f"supervisord runs {sorted(PROGRAMS)}",
            )
            # The command became supervisord: same pid, its programs its children.
            assert (run / "supervisord.pid").read_text().strip() == str(started.pid)
            programs = descendants(started.pid)
            assert len(long_lived(programs)) == len(PROGRAMS), programs
            started.send_signal(signum)
            assert started.wait(60) == (0 if signum == signal.SIGTERM else -signal.SIGKILL)
            wait_for(
                lambda: not survivors(programs),
                timeout=60,
                what=f"supervisord's programs end after its {signum.name}: {survivors(programs)}",
            )
        finally:
            lifetime.stop(started)
            kill_all(programs)
