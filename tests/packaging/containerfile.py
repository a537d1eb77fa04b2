"""The Containerfile read as a container engine reads it, for a test that cannot run one.

`parse` turns the file into stages of instructions (continuation lines joined, comments
dropped, `ARG` defaults substituted, `RUN`/`COPY` flags separated, JSON-array and shell
forms both understood). `ignored` applies `.dockerignore` to the build context the way
`COPY` sees it. The test then replays the steps it can replay without root in a scratch
directory that stands in for the image's file system.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: RUN, COPY, ENV, ...
    flags: dict[str, str]  # RUN --mount=..., COPY --from=..., with their values
    arguments: tuple[str, ...]  # exec form or shell words (RUN keeps one shell string)
    line: int


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[Instruction] = field(default_factory=list)
    # The stage's ARGs with their defaults: RUN sees them as environment variables.
    args: dict[str, str] = field(default_factory=dict)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The stage's ENV, in order, each value expanded against the ones before it."""
        values = dict(base or {})
        for instruction in self.all("ENV"):
            for word in instruction.arguments:
                key, _, value = word.partition("=")
                values[key] = substitute(value, self.args | values)
        return values

    def workdir(self) -> str:
        dirs = self.all("WORKDIR")
        return dirs[-1].arguments[0] if dirs else "/"


def substitute(text: str, values: dict[str, str]) -> str:
    """`${NAME}` and `$NAME` as the engine expands them in ENV, COPY and FROM."""
    return _VARIABLE.sub(lambda m: values.get(m.group(1) or m.group(2), ""), text)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction text): comments dropped, `\\` continuations joined."""
    lines: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction is dropped, as the engine does
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        lines.append((start, " ".join(p for p in pending if p)))
        pending = []
    if pending:
        raise ValueError(f"line {start}: the file ends inside a continued instruction")
    return lines


def _split_flags(rest: str) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    while rest.startswith("--"):
        word, _, rest = rest.partition(" ")
        name, _, value = word[2:].partition("=")
        flags[name] = value
        rest = rest.lstrip()
    return flags, rest


def _arguments(keyword: str, rest: str) -> tuple[str, ...]:
    if rest.startswith("["):
        words = json.loads(rest)
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"{keyword}: the exec form must be a JSON array of strings")
        return tuple(words)
    if keyword == "RUN":
        return (rest,)
    return tuple(shlex.split(rest))


def parse(text: str) -> list[Stage]:
    """The stages of a Containerfile; `ARG` defaults are substituted where they apply."""
    stages: list[Stage] = []
    global_args: dict[str, str] = {}
    for number, line in logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG":
            name, _, default = rest.strip().partition("=")
            target = stages[-1].args if stages else global_args
            target[name] = substitute(default, global_args)
            continue
        if keyword == "FROM":
            words = substitute(rest, global_args).split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(base=words[0], name=name))
            continue
        if not stages:
            raise ValueError(f"line {number}: {keyword} before the first FROM")
        flags, rest = _split_flags(rest.strip())
        if keyword not in ("ENV", "RUN"):  # ENV expands in order (Stage.env), RUN in its shell
            rest = substitute(rest, global_args | stages[-1].args)
        stages[-1].instructions.append(
            Instruction(keyword, flags, _arguments(keyword, rest), number)
        )
    return stages


def base_python() -> str:
    """The interpreter this test runs on, outside any virtual environment: it plays the
    base image's Python (the same minor version)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return str(Path(sys.base_prefix) / "bin" / f"python{version}")


def stage(stages: list[Stage], name: str) -> Stage:
    found = [s for s in stages if s.name == name]
    if len(found) != 1:
        raise AssertionError(f"no single stage named {name!r} in {[s.name for s in stages]}")
    return found[0]


def ignore_patterns(context: Path) -> list[str]:
    path = context / ".dockerignore"
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line.strip("/") for line in lines if line and not line.startswith("#")]


def ignored(relative: PurePosixPath, patterns: list[str]) -> bool:
    """Whether `.dockerignore` keeps this path (or a folder above it) out of the context.
    Patterns are matched from the context's root; `**/` matches any depth (no `!` rules)."""
    parts = relative.parts
    prefixes = [PurePosixPath(*parts[: i + 1]).as_posix() for i in range(len(parts))]
    for pattern in patterns:
        if pattern.startswith("!"):
            raise AssertionError(".dockerignore exceptions (!) are not understood by this test")
        for prefix in prefixes:
            if fnmatch.fnmatchcase(prefix, pattern):
                return True
            if pattern.startswith("**/") and fnmatch.fnmatchcase(
                PurePosixPath(prefix).name, pattern[3:]
            ):
                return True
    return False
