"""docs/reference/ is generated from the code (`python -m docs.generate`); these tests fail
when a page no longer says what the code does, or when a list the generator reads misses
something the code defines."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from docs import generate

REPO = Path(__file__).resolve().parents[2]
METRIC_KINDS = {"Counter", "Gauge", "Histogram", "Summary", "Info", "Enum"}


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "docs.generate", "--check", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_reference_pages_say_what_the_code_does() -> None:
    result = _check()
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_page_that_no_longer_matches_the_code_is_named(tmp_path: Path) -> None:
    shutil.copytree(generate.REFERENCE, tmp_path, dirs_exist_ok=True)
    flags = tmp_path / "flags.md"
    flags.write_text(flags.read_text().replace("`--cloud-config`", "`--cloud-conf`"))

    result = _check("--out", str(tmp_path))

    assert result.returncode == 1
    assert "flags.md" in result.stdout
    assert "--cloud-conf`" in result.stdout


def _metric_names_in_source() -> set[str]:
    """Every `Counter("name", ...)`-like call with a literal name in the product code."""
    names = set()
    for path in generate.product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and generate._callee(node) in METRIC_KINDS
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(str(node.args[0].value))
    return names


def test_every_metric_the_code_defines_is_on_the_metrics_page() -> None:
    page = (generate.REFERENCE / "metrics.md").read_text()
    names = _metric_names_in_source()

    assert len(names) > 30
    missing = sorted(n for n in names if f"`{n}`" not in page and f"`{n}_total`" not in page)
    assert not missing, f"metrics defined but not collected by docs/generate.py: {missing}"


def test_every_warning_reason_has_a_troubleshooting_entry() -> None:
    guide = (REPO / "docs" / "operator-guide.md").read_text()
    troubleshooting = guide.split('<a id="troubleshooting"></a>', 1)[1]
    warnings = [e.reason for e in generate.events() if e.type == "Warning"]

    assert len(warnings) > 15
    missing = [r for r in warnings if f"### `{r}`" not in troubleshooting]
    assert not missing, f"Warning reasons without a troubleshooting entry: {missing}"


def test_every_cloud_conf_section_the_parser_knows_is_listed() -> None:
    """The ast walk of config.py finds every section the module names."""
    source = generate.CONFIG.read_text()
    page = (generate.REFERENCE / "cloud-conf.md").read_text()
    for section in (
        "Global",
        "LoadBalancer",
        "LoadBalancerClass",
        "Networking",
        "Route",
        "Metadata",
    ):
        assert f'"{section}"' in source
        assert f"| [{section}" in page


EVENT_MAKERS = """
def event(obj, reason, message, *, warning=False):
    return RecordEvent(regarding=obj, reason=reason, type="Warning" if warning else "Normal")

def failed(obj, message, *, reason="SomethingFailed"):
    return event(obj, reason, message, warning=True)

def sync(obj, events):
    events.warn(BAD, "a constant from another module")
    return (event(obj, "Made", "done"), event(obj, "Refused", "no", warning=True))
"""
WARN = """
BAD = "AnnotationBad"

class Events:
    def warn(self, reason, message):
        self.events.append(ProviderEvent(type="Warning", reason=reason, message=message))
"""


def test_events_made_through_helpers_are_found_with_their_types() -> None:
    sources = {"controller.py": EVENT_MAKERS, "annotations.py": WARN}
    constants = {"BAD": {"AnnotationBad"}}

    found = generate.reasons_in(sources, constants)

    assert found == {
        ("SomethingFailed", "Warning"): {"controller.py"},
        ("Made", "Normal"): {"controller.py"},
        ("Refused", "Warning"): {"controller.py"},
        ("AnnotationBad", "Warning"): {"controller.py"},
    }
