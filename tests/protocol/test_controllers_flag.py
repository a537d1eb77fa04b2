"""`--controllers` as upstream: `*`, names, `-name`, long aliases, unknown names refused."""

import pytest

from pyccm.protocol.controllers import parse_controllers


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("*", ("cloud-node", "cloud-node-lifecycle", "service", "route")),
        ("*,-route", ("cloud-node", "cloud-node-lifecycle", "service")),
        ("cloud-node-controller,service", ("cloud-node", "service")),
        ("-service", ()),
    ],
)
def test_controllers_flag_values(value: str, expected: tuple[str, ...]) -> None:
    assert parse_controllers(value) == expected


def test_an_unknown_controller_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown controller 'nodes'.*cloud-node"):
        parse_controllers("nodes")
