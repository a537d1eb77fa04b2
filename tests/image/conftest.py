"""The image tier (`make image-test`, marker `image`): the image `make image` built, run with
buildah. Not part of `make test`: it needs buildah, root and the built archive, and takes
minutes; a plain `pytest` run skips it unless `-m image` selects it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.image.container import Container, container

MARKER = "image"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: runs the built image (make image-test)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if re.search(rf"(?<!not )\b{MARKER}\b", config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="the image tier: make image-test")
    for item in items:
        if item.get_closest_marker(MARKER):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def image() -> Iterator[Container]:
    """A container of the built image (build/pyccm-image.oci.tar), removed afterwards."""
    with container() as box:
        yield box
