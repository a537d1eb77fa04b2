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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    admits: Callable[[Any], bool]
    # A value of the right JSON type can still be refused (base64 that is not base64).
    check: Callable[[Any], str | None] = lambda _value: None


@dataclass(frozen=True)
class Struct:
    """A Go struct: `name` is its OpenAPI definition name (io.k8s.api.apps.v1.Deployment)."""

    name: str
    fields: Mapping[str, Shape]

    @property
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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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


STRING = Scalar("string", {"type": "string"}, lambda v: isinstance(v, str))
BOOL = Scalar("bool", {"type": "boolean"}, lambda v: isinstance(v, bool))
INT32 = Scalar("int32", {"type": "integer", "format": "int32"}, _is_int)
INT64 = Scalar("int64", {"type": "integer", "format": "int64"}, _is_int)
INT_OR_STRING = Scalar(
    "intstr.IntOrString",
    {"x-kubernetes-int-or-string": True},
    lambda v: isinstance(v, str) or _is_int(v),
)
# resource.Quantity unmarshals from a string or a JSON number ("500m", 2, 0.5).
QUANTITY = Scalar(
    "resource.Quantity",
    {"x-kubernetes-int-or-string": True},
    lambda v: isinstance(v, str | int | float) and not isinstance(v, bool),
)
BYTES = Scalar(
    "[]uint8", {"type": "string", "format": "byte"}, lambda v: isinstance(v, str), _base64_error
)
STRINGS = ListOf(STRING)


# -- decoding -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _At:
    """Where the walk is: the path as the API server prints unknown fields
    (`spec.template.spec.containers[0].foo`), the path without indices Go's decoder prints,
    and the struct that holds it."""

    shown: str = ""
    go_field: str = ""
    owner: str = ""

    def field(self, name: str, owner: Struct) -> _At:
        return _At(
            f"{self.shown}.{name}" if self.shown else name,
            f"{self.go_field}.{name}" if self.go_field else name,
            owner.go_name,
        )

    def item(self, index: int | str) -> _At:
        return _At(f"{self.shown}[{index}]", self.go_field, self.owner)


def conform(shape: Struct, obj: Obj) -> list[str]:
    """Decode `obj` as the Go struct would, in place: raise DecodeError for a value of the
    wrong JSON type, drop nulls and unknown fields, and return the unknown fields' paths."""
    unknown: list[str] = []
    _conform_struct(shape, obj, _At(), unknown)
    return unknown


def _conform(shape: Shape, value: Any, at: _At, unknown: list[str]) -> None:
    match shape:
        case Free():
            return
        case Scalar():
            if not shape.admits(value):
                raise DecodeError(_mismatch(value, shape.go_type, at))
            problem = shape.check(value)
            if problem:
                raise DecodeError(problem)
        case Struct():
            _expect(value, dict, shape, at)
            _conform_struct(shape, value, at, unknown)
        case ListOf():
            _expect(value, list, shape, at)
            for index, item in enumerate(value):
                _conform_item(shape.items, item, at.item(index), unknown)
        case MapOf():
            _expect(value, dict, shape, at)
            for key, item in value.items():
                _conform_item(shape.values, item, at.item(key), unknown)


def _expect(value: Any, json_type: type, shape: Shape, at: _At) -> None:
    if not isinstance(value, json_type):
        raise DecodeError(_mismatch(value, _go_type(shape), at))


def _conform_item(shape: Shape, item: Any, at: _At, unknown: list[str]) -> None:
    if item is not None:
        _conform(shape, item, at, unknown)


def _conform_struct(shape: Struct, value: Obj, at: _At, unknown: list[str]) -> None:
    for name in list(value):
        field = shape.fields.get(name)
        if field is None:
            unknown.append(at.field(name, shape).shown)
            del value[name]
        elif value[name] is None:
            del value[name]
        else:
            _conform(field, value[name], at.field(name, shape), unknown)


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


def _mismatch(value: Any, go_type: str, at: _At) -> str:
    return (
        f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
        f"{at.owner}.{at.go_field} of type {go_type}"
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
