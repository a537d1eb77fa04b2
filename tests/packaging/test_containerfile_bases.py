"""The Containerfile's bases are build arguments (`make image` builds on local Debian bases
where no registry is reachable: deploy/image/), and its runtime needs nothing writable
but PYCCM_RUNTIME_DIR. Read from the file, as tests/packaging/containerfile.py parses it;
tests/image runs the built image."""

from __future__ import annotations

from pathlib import Path

from tests.packaging.containerfile import logical_lines, parse, stage

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = (REPO / "Containerfile").read_text()


def test_each_stage_takes_its_base_from_a_build_argument() -> None:
    froms = [line.split() for _, line in logical_lines(CONTAINERFILE) if line.startswith("FROM")]
    assert [(words[1], words[3]) for words in froms] == [
        ("${PYTHON_IMAGE}", "builder"),
        ("${RUNTIME_IMAGE}", "runtime"),
    ]
    # Both default to python:3.11-slim: the runtime's base is the builder's unless given.
    stages = parse(CONTAINERFILE)
    assert stage(stages, "builder").base == stage(stages, "runtime").base == "python:3.11-slim"
    with_debian = parse(CONTAINERFILE.replace("=python:3.11-slim", "=localhost/base:build", 1))
    assert stage(with_debian, "runtime").base == "localhost/base:build"


def test_temporary_files_go_to_the_runtime_dir() -> None:
    # supervisord asks Python for a temporary directory at its start: on a read-only root
    # none of /tmp, /var/tmp or the working directory is writable, and it ended there.
    env = stage(parse(CONTAINERFILE), "runtime").env()
    assert env["TMPDIR"] == env["PYCCM_RUNTIME_DIR"]
