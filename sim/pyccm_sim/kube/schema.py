"""Object shapes: the fields of the upstream Go types, their JSON types, how their lists merge.

kube-apiserver decodes every write into a Go struct, and the struct decides three things a
client sees. One description per type (shapes.py) serves all three here:

- decoding (`conform`): a value of the wrong JSON type is refused (`json: cannot unmarshal
  string into Go struct field DeploymentSpec.spec.replicas of type int32`), and a field the
  struct does not have is dropped, since the struct has nowhere to keep it, and reported
  for the request's `fieldValidation` to decide (Strict: 400, Warn: a Warning header,
  Ignore: nothing);
- merging (`merge_lists`): the lists a strategic merge patch and server-side apply merge
  item by item, keyed as the Go field's `patchStrategy`/`patchMergeKey` tags say;
- OpenAPI (`openapi_schema`): the schemas /openapi/v2 and /openapi/v3 publish.

Where precision buys nothing a shape is `ANY`: any JSON, kept as sent
(`x-kubernetes-preserve-unknown-fields`), e.g. a node's status or a volume's source.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

Obj = dict[str, Any]
MergeKey = str | None
"""A merge list's key field, or None for a list of scalars merged as a set."""


class DecodeError(Exception):
    """A value the Go struct cannot hold (the API server's JSON decoding error)."""


@dataclass(frozen=True)
class Free:
    """Any JSON value, kept as sent."""


@dataclass(frozen=True)
class Scalar:
    go_type: str
    openapi: Mapping[str, object]
    # The JSON values it holds (a bool is never a number, as in Go).
    json_types: tuple[type, ...]
    # A value of the right JSON type can still be refused (base64 that is not base64).
    check: Callable[[Any], str | None] | None = None

    def admits(self, value: Any) -> bool:
        return isinstance(value, self.json_types) and (
            bool in self.json_types or not isinstance(value, bool)
        )

    def passes(self, value: Any) -> bool:
        """The common case, checked inline by the walk: admitted, nothing more to check."""
        return self.check is None and self.admits(value)


@dataclass(frozen=True)
class Struct:
    """A Go struct: `name` is its OpenAPI definition name (io.k8s.api.apps.v1.Deployment)."""

    name: str
    fields: Mapping[str, Shape]

    @cached_property
    def go_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def go_type(self) -> str:
        package, _, kind = self.name.rpartition(".")
        return f"{package.rsplit('.', 1)[-1]}.{kind}"


@dataclass(frozen=True)
class ListOf:
    items: Shape
    # The Go field's patchMergeKey, and its patchStrategy ("merge", "merge,retainKeys");
    # a list without a strategy is atomic: every write replaces it whole.
    merge_key: str = ""
    strategy: str = ""

    @property
    def merges(self) -> bool:
        return "merge" in self.strategy.split(",")


@dataclass(frozen=True)
class MapOf:
    values: Shape


Shape = Free | Scalar | Struct | ListOf | MapOf
ANY = Free()


def _base64_error(value: Any) -> str | None:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return f"illegal base64 data at input byte {_first_bad_byte(value)}"
    return None


def _first_bad_byte(text: str) -> int:
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    for index, char in enumerate(text):
        if char not in alphabet:
            return index
    return len(text) - len(text) % 4


STRING = Scalar("string", {"type": "string"}, (str,))
BOOL = Scalar("bool", {"type": "boolean"}, (bool,))
INT32 = Scalar("int32", {"type": "integer", "format": "int32"}, (int,))
INT64 = Scalar("int64", {"type": "integer", "format": "int64"}, (int,))
INT_OR_STRING = Scalar("intstr.IntOrString", {"x-kubernetes-int-or-string": True}, (int, str))
# resource.Quantity unmarshals from a string or a JSON number ("500m", 2, 0.5).
QUANTITY = Scalar("resource.Quantity", {"x-kubernetes-int-or-string": True}, (str, int, float))
BYTES = Scalar("[]uint8", {"type": "string", "format": "byte"}, (str,), _base64_error)
STRINGS = ListOf(STRING)


# -- decoding -------------------------------------------------------------------------------

Trail = tuple[Any, ...] | None
"""Where the walk is, built only as a linked list of (parent trail, field name or list
index, the struct holding the field): every write walks its object, and the paths are
only spelled out for the rare unknown field or decoding error."""


def conform(shape: Struct, obj: Obj) -> list[str]:
    """Decode `obj` as the Go struct would, in place: raise DecodeError for a value of the
    wrong JSON type, drop nulls and unknown fields, and return the unknown fields' paths
    as the API server prints them (`spec.template.spec.containers[0].foo`)."""
    unknown: list[str] = []
    _conform_struct(shape, obj, None, unknown)
    return unknown


def _conform(shape: Shape, value: Any, trail: Trail, unknown: list[str]) -> None:
    match shape:
        case Free():
            return
        case Scalar():
            if not shape.admits(value):
                raise DecodeError(_mismatch(value, shape.go_type, trail))
            problem = shape.check(value) if shape.check else None
            if problem:
                raise DecodeError(problem)
        case Struct():
            _expect(value, dict, shape, trail)
            _conform_struct(shape, value, trail, unknown)
        case ListOf():
            _expect(value, list, shape, trail)
            _conform_items(shape.items, value, enumerate(value), trail, unknown)
        case MapOf():
            _expect(value, dict, shape, trail)
            _conform_items(shape.values, value, value.items(), trail, unknown)


def _conform_items(
    shape: Shape,
    container: Any,
    items: Iterable[tuple[Any, Any]],
    trail: Trail,
    unknown: list[str],
) -> None:
    if shape is ANY:
        return
    scalar = shape if type(shape) is Scalar else None
    for key, item in items:
        if item is None:
            # Go decodes a null item of a []string or map[string]string as "" (a null
            # struct item stays, as a zero struct would).
            if scalar is not None:
                container[key] = scalar.json_types[0]()
        elif not (scalar and scalar.passes(item)):
            _conform(shape, item, (trail, key, None), unknown)


def _conform_struct(shape: Struct, value: Obj, trail: Trail, unknown: list[str]) -> None:
    dropped = []
    for name, item in value.items():
        field = shape.fields.get(name)
        if field is None:
            unknown.append(_shown((trail, name, shape)))
            dropped.append(name)
        elif item is None:
            dropped.append(name)
        elif field is not ANY and not (type(field) is Scalar and field.passes(item)):
            _conform(field, item, (trail, name, shape), unknown)
    for name in dropped:
        del value[name]


def _expect(value: Any, json_type: type, shape: Shape, trail: Trail) -> None:
    if not isinstance(value, json_type):
        raise DecodeError(_mismatch(value, _go_type(shape), trail))


def _steps(trail: Trail) -> list[tuple[Any, Struct | None]]:
    steps = []
    while trail is not None:
        trail, step, owner = trail
        steps.append((step, owner))
    return steps[::-1]


def _shown(trail: Trail) -> str:
    text = ""
    for step, owner in _steps(trail):
        if owner is None:
            text += f"[{step}]"
        else:
            text += f".{step}" if text else str(step)
    return text


def _go_type(shape: Shape) -> str:
    match shape:
        case Free():
            return "interface {}"
        case Scalar() | Struct():
            return shape.go_type
        case ListOf():
            return f"[]{_go_type(shape.items)}"
        case MapOf():
            return f"map[string]{_go_type(shape.values)}"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _mismatch(value: Any, go_type: str, trail: Trail) -> str:
    """Go's UnmarshalTypeError: the struct holding the field, and the field's path."""
    steps = [(step, owner) for step, owner in _steps(trail) if owner is not None]
    if not steps:
        return f"json: cannot unmarshal {_json_kind(value)} into Go value of type {go_type}"
    path = ".".join(str(step) for step, _ in steps)
    return (
        f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
        f"{steps[-1][1].go_name}.{path} of type {go_type}"
    )


# -- merging --------------------------------------------------------------------------------


def merge_lists(shape: Shape, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], MergeKey]:
    """The merge lists under `shape`, by path (list items add no path segment, as the patch
    module walks them)."""
    found: dict[tuple[str, ...], MergeKey] = {}
    match shape:
        case Struct():
            for name, field in shape.fields.items():
                found.update(merge_lists(field, (*prefix, name)))
        case ListOf():
            if shape.merges:
                found[prefix] = shape.merge_key or None
            found.update(merge_lists(shape.items, prefix))
        case _:
            pass
    return found


# -- OpenAPI --------------------------------------------------------------------------------


def openapi_schema(shape: Shape, ref_prefix: str, definitions: dict[str, Obj]) -> Obj:
    """`shape` as an OpenAPI schema; each struct it reaches is added to `definitions` once
    and referenced (`ref_prefix` is `#/definitions/` in v2, `#/components/schemas/` in v3)."""
    match shape:
        case Free():
            return {"x-kubernetes-preserve-unknown-fields": True}
        case Scalar():
            return dict(shape.openapi)
        case Struct():
            if shape.name not in definitions:
                definitions[shape.name] = {}  # placed first: a type may refer to itself
                definitions[shape.name] = {
                    "type": "object",
                    "properties": {
                        name: openapi_schema(field, ref_prefix, definitions)
                        for name, field in sorted(shape.fields.items())
                    },
                }
            return {"$ref": ref_prefix + shape.name}
        case ListOf():
            return _list_schema(shape, ref_prefix, definitions)
        case MapOf():
            return {
                "type": "object",
                "additionalProperties": openapi_schema(shape.values, ref_prefix, definitions),
            }


def _list_schema(shape: ListOf, ref_prefix: str, definitions: dict[str, Obj]) -> Obj:
    schema: Obj = {"type": "array", "items": openapi_schema(shape.items, ref_prefix, definitions)}
    if not shape.merges:
        schema["x-kubernetes-list-type"] = "atomic"
        return schema
    schema["x-kubernetes-patch-strategy"] = shape.strategy
    if shape.merge_key:
        schema["x-kubernetes-patch-merge-key"] = shape.merge_key
        schema["x-kubernetes-list-type"] = "map"
        schema["x-kubernetes-list-map-keys"] = [shape.merge_key]
    else:
        schema["x-kubernetes-list-type"] = "set"
    return schema
