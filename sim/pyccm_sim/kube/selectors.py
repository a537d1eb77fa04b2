"""Label and field selectors, parsed once per request into a predicate over object dicts.

The grammar is the API server's (k8s.io/apimachinery `labels.Parse` and `fields`):
labels take `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`;
fields take `f=v`, `f==v`, `f!=v` over the few fields each resource indexes. Anything
else is a 400 BadRequest with a message in the API server's words, never a crash.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyccm_sim.kube.errors import bad_request

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")
_TOKEN_RE = re.compile(r"\s*(!=|==|=|!|\(|\)|,|<|>|[^\s!=(),<>]+)")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        match self.op:
            case "exists":
                return present
            case "!exists":
                return not present
            case "=" | "==" | "in":
                return present and value in self.values
            case "!=" | "notin":
                return not present or value not in self.values
            case ">" | "<":
                return present and _compare(value, self.op, self.values[0])
        return False


def _compare(value: str | None, op: str, bound: str) -> bool:
    try:
        number = int(value or "")
    except ValueError:
        return False
    return number > int(bound) if op == ">" else number < int(bound)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN_RE.match(text, position)
        if not match:
            raise bad_request(f"unable to parse requirement: found '{text[position:]}'")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.position = 0

    def fail(self, why: str) -> Exception:
        return bad_request(f"unable to parse requirement: {why}")

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise self.fail(f"found '', expected more in '{self.text}'")
        self.position += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements = []
        while self.peek() is not None:
            requirements.append(self.requirement())
            if self.peek() is not None and self.take() != ",":
                raise self.fail(f"expected ',' in '{self.text}'")
        return requirements

    def requirement(self) -> Requirement:
        token = self.take()
        if token == "!":
            return Requirement(self.key(self.take()), "!exists")
        key = self.key(token)
        op = self.peek()
        if op is None or op == ",":
            return Requirement(key, "exists")
        self.position += 1
        if op in ("=", "==", "!="):
            return Requirement(key, op, (self.value(),))
        if op in ("in", "notin"):
            return Requirement(key, op, self.value_set())
        if op in (">", "<"):
            bound = self.take()
            if not bound.lstrip("-").isdigit():
                raise self.fail(f"for 'Gt', 'Lt' operators, the value must be an integer: {bound}")
            return Requirement(key, op, (bound,))
        raise self.fail(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")

    def key(self, token: str) -> str:
        if not _KEY_RE.match(token) or len(token) > 316:
            raise self.fail(f'invalid label key "{token}": must be a qualified name')
        return token

    def value(self) -> str:
        token = self.peek()
        if token is None or token in (",", ")"):
            return ""
        self.position += 1
        if not _VALUE_RE.match(token) or len(token) > 63:
            raise self.fail(f'invalid label value: "{token}": must be a valid label value')
        return token

    def value_set(self) -> tuple[str, ...]:
        if self.take() != "(":
            raise self.fail(f"found '{self.tokens[self.position - 1]}', expected: '('")
        values = []
        while True:
            values.append(self.value())
            token = self.take()
            if token == ")":
                return tuple(values)
            if token != ",":
                raise self.fail(f"found '{token}', expected: ',', ')'")


def parse_label_selector(text: str) -> Predicate | None:
    """None for an empty selector (matches everything, and costs nothing per object)."""
    if not text.strip():
        return None
    requirements = _LabelParser(text).parse()

    def matches(obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return matches


def field_value(obj: Obj, path: tuple[str, ...]) -> str:
    """A field as the API's field-selector index renders it: bools lowercase, absent = ""."""
    current: Any = obj
    for part in path:
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
    if isinstance(current, bool):
        return "true" if current else "false"
    return "" if current is None else str(current)


def parse_field_selector(text: str, fields: Mapping[str, tuple[str, ...]]) -> Predicate | None:
    if not text.strip():
        return None
    terms = []
    for term in text.split(","):
        name, op, value = _split_field_term(term.strip())
        if name not in fields:
            known = ", ".join(f'"{f}"' for f in sorted(fields))
            raise bad_request(f'"{name}" is not a known field selector: only {known}')
        terms.append((fields[name], op == "!=", value))

    def matches(obj: Obj) -> bool:
        return all((field_value(obj, path) == value) != negated for path, negated, value in terms)

    return matches


def _split_field_term(term: str) -> tuple[str, str, str]:
    for op in ("!=", "==", "="):
        name, found, value = term.partition(op)
        if found:
            return name.strip(), op, value.strip()
    raise bad_request(f"invalid selector: '{term}'; can't understand '{term}'")


def both(first: Predicate | None, second: Predicate | None) -> Predicate | None:
    if first is None or second is None:
        return first or second

    def matches(obj: Obj) -> bool:
        return first(obj) and second(obj)

    return matches
