"""One JSON question to a short-lived child process, and its one JSON answer.

The provider hands two jobs to the OpenStack project's own libraries, each in a child
process that lives only as long as the job (docs/architecture.md#provider-http):
Keystone authentication (`authenticate.py`, keystoneauth1) and reading clouds.yaml
(`clouds.py`, openstacksdk's loader). Their imports (about 30 MiB) never become resident in
a long-lived worker, and a child that does not answer in time is killed: the caller waits
for its deadline and no longer.

The question goes on the child's stdin (so secrets never appear in a process listing), the
answer comes on its stdout: `{"ok": {...}}` or `{"error": "one line", "status": N|null,
"retryable": bool}`. The child is tied to its parent (`pyccm.lifetime`): it dies with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from pyccm import lifetime


class ChildError(Exception):
    """The child's one-line refusal (or why it gave none). Carries no secret: the child's
    messages are built from exception types, hosts and HTTP statuses, never bodies sent."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class ChildTimeout(ChildError):
    """The child gave no answer within its deadline and was killed."""


def ask(module: str, question: Mapping[str, Any], *, deadline: float) -> dict[str, Any]:
    """Run `python -m module`, send `question`, return its answer; ChildError otherwise.

    `deadline` is in seconds from now, for the whole exchange (the child's start included).
    """
    child = lifetime.spawn(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = child.communicate(json.dumps(question).encode(), timeout=deadline)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()  # reaps it and closes its pipes
        raise ChildTimeout(f"no answer within {deadline:g} s (the deadline)") from None
    finally:
        lifetime.stop(child, timeout=1.0)  # forgotten by lifetime's exit hook
    try:
        answer = json.loads(out)
    except ValueError:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ChildError(f"{module} exited {child.returncode}: {last[0][:300]}") from None
    if "ok" in answer:
        return dict(answer["ok"])
    raise ChildError(
        str(answer.get("error", "failed")),
        status=answer.get("status"),
        retryable=bool(answer.get("retryable", True)),
    )


def serve(answer: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """The child's side: read the question from stdin, print the answer. `answer` raises
    ChildError to refuse; any other exception is reported by its type alone."""
    result: dict[str, Any]
    try:
        result = {"ok": answer(json.load(sys.stdin))}
        code = 0
    except ChildError as refused:
        result = {
            "error": str(refused),
            "status": refused.status,
            "retryable": refused.retryable,
        }
        code = 1
    except Exception as exc:
        result = {"error": f"unexpected {type(exc).__name__}", "status": None, "retryable": True}
        code = 1
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return code
