"""The three PATCH flavours the API server accepts, applied to plain JSON dicts.

- JSON patch (RFC 6902): `add`, `remove`, `replace`, `move`, `copy`, `test`.
- JSON merge patch (RFC 7386): maps merge, `null` deletes, lists are replaced.
- Strategic merge patch: a merge patch where the lists the resource's Go types mark as
  merge lists (see `resources.py`) merge element by element on their merge key, string
  sets merge as sets, and the directives kubectl and client-go send are honoured:
  `$patch: replace|delete|merge`, `$setElementOrder/<list>`,
  `$deleteFromPrimitiveList/<list>`, `$retainKeys`.

A patch that cannot be applied raises `PatchError`; the API layer reports it as the API
server does (422 for a failed operation or test, 400 for a patch that is not a patch).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pyccm_sim.kube.schema import MergeKey

Obj = dict[str, Any]
Path = tuple[str, ...]
MergeSchema = Mapping[Path, MergeKey]

_DIRECTIVE = "$patch"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_RETAIN = "$retainKeys"


class PatchError(Exception):
    """The patch is well-formed JSON but cannot be applied to this object."""


class MalformedPatch(Exception):
    """The body is not a patch of the declared type at all."""


# -- JSON patch ---------------------------------------------------------------------------


def json_patch(document: Obj, operations: Any) -> Obj:
    if not isinstance(operations, list):
        raise MalformedPatch("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    result: Any = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict) or not isinstance(operation.get("op"), str):
            raise MalformedPatch(f"invalid JSON patch operation: {operation!r}")
        result = _apply_operation(result, operation)
    if not isinstance(result, dict):
        raise PatchError("the patched document is not an object")
    return result


def _apply_operation(document: Any, operation: Obj) -> Any:
    op = operation["op"]
    path = _pointer(operation, "path")
    match op:
        case "add":
            return _add(document, path, copy.deepcopy(_value(operation)))
        case "remove":
            _remove(document, path)
            return document
        case "replace":
            _remove(document, path)
            return _add(document, path, copy.deepcopy(_value(operation)))
        case "move":
            source = _pointer(operation, "from")
            value = _get(document, source)
            _remove(document, source)
            return _add(document, path, value)
        case "copy":
            return _add(document, path, copy.deepcopy(_get(document, _pointer(operation, "from"))))
        case "test":
            if _get(document, path) != _value(operation):
                raise PatchError(f"testing value /{'/'.join(path)} failed")
            return document
    raise MalformedPatch(f"Unexpected kind: {op}")


def _value(operation: Obj) -> Any:
    if "value" not in operation:
        raise MalformedPatch(f"missing value in operation {operation.get('op')!r}")
    return operation["value"]


def _pointer(operation: Obj, name: str) -> list[str]:
    text = operation.get(name)
    if not isinstance(text, str) or (text and not text.startswith("/")):
        raise MalformedPatch(f"invalid JSON pointer in {name!r}: {text!r}")
    if not text:
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _parent(document: Any, path: list[str]) -> tuple[Any, str]:
    if not path:
        raise PatchError("the root of the document cannot be the target")
    return _get(document, path[:-1]), path[-1]


def _get(document: Any, path: list[str]) -> Any:
    current = document
    for part in path:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list):
            current = current[_index(current, part, appending=False)]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(path)}")
    return current


def _index(items: list[Any], part: str, *, appending: bool) -> int:
    if appending and part == "-":
        return len(items)
    if not part.isdigit():
        raise PatchError(f"invalid array index: {part}")
    index = int(part)
    if index > len(items) or (index == len(items) and not appending):
        raise PatchError(f"array index out of bounds: {index}")
    return index


def _add(document: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, appending=True), value)
    else:
        raise PatchError(f"doc is missing path: /{'/'.join(path)}")
    return document


def _remove(document: Any, path: list[str]) -> None:
    parent, last = _parent(document, path)
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, appending=False)]
    else:
        raise PatchError(f"doc is missing path: /{'/'.join(path)}")


# -- JSON merge patch ---------------------------------------------------------------------


def merge_patch(document: Obj, patch: Any) -> Obj:
    if not isinstance(patch, dict):
        raise MalformedPatch("a merge patch must be a JSON object")
    result = _merge(document, patch)
    assert isinstance(result, dict)
    return result


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


# -- strategic merge patch ----------------------------------------------------------------


def strategic_merge_patch(document: Obj, patch: Any, schema: MergeSchema) -> Obj:
    if not isinstance(patch, dict):
        raise MalformedPatch("a strategic merge patch must be a JSON object")
    result = _strategic_map(document, patch, (), schema)
    return result if result is not None else {}


def _strategic_map(target: Any, patch: Obj, path: Path, schema: MergeSchema) -> Obj | None:
    directive = patch.get(_DIRECTIVE)
    body = {k: v for k, v in patch.items() if k != _DIRECTIVE}
    if directive == "delete":
        return None
    if directive == "replace":
        replaced: Obj = _strip_directives(body)
        return replaced
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch type: {directive}")
    result: Obj = dict(target) if isinstance(target, dict) else {}
    _retain_keys(result, body.pop(_RETAIN, None))
    orders = {k[len(_ORDER) :]: body.pop(k) for k in list(body) if k.startswith(_ORDER)}
    removals = {
        k[len(_DELETE_PRIMITIVE) :]: body.pop(k)
        for k in list(body)
        if k.startswith(_DELETE_PRIMITIVE)
    }
    for key, value in body.items():
        _strategic_field(result, key, value, (*path, key), schema)
    for key, values in removals.items():
        _delete_from_primitive_list(result, key, values)
    for key, order in orders.items():
        _set_element_order(result, key, order, schema.get((*path, key)))
    return result


def _strategic_field(result: Obj, key: str, value: Any, path: Path, schema: MergeSchema) -> None:
    if value is None:
        result.pop(key, None)
    elif isinstance(value, dict):
        merged = _strategic_map(result.get(key), value, path, schema)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    elif isinstance(value, list) and path in schema:
        result[key] = _strategic_list(result.get(key), value, path, schema)
    else:
        result[key] = _strip_directives(value)


def _strategic_list(current: Any, patch: list[Any], path: Path, schema: MergeSchema) -> list[Any]:
    items = list(current) if isinstance(current, list) else []
    if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
        return [_strip_directives(p) for p in patch if not _is_directive(p)]
    key = schema[path]
    if key is None:
        return items + [p for p in patch if p not in items and not _is_directive(p)]
    for element in patch:
        if not isinstance(element, dict) or key not in element:
            raise PatchError(f"map: {element!r} does not contain declared merge key: {key}")
        position = next(
            (
                i
                for i, item in enumerate(items)
                if isinstance(item, dict) and item.get(key) == element[key]
            ),
            None,
        )
        if element.get(_DIRECTIVE) == "delete":
            items = [i for i in items if not (isinstance(i, dict) and i.get(key) == element[key])]
        elif position is None:
            items.append(_strip_directives(element))
        else:
            merged = _strategic_map(items[position], element, path, schema)
            items[position] = merged if merged is not None else items[position]
    return items


def _is_directive(element: Any) -> bool:
    return isinstance(element, dict) and set(element) == {_DIRECTIVE}


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if k not in (_DIRECTIVE, _RETAIN) and not k.startswith((_ORDER, _DELETE_PRIMITIVE))
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _retain_keys(result: Obj, keep: Any) -> None:
    if keep is None:
        return
    if not isinstance(keep, list):
        raise PatchError(f"$retainKeys must be a list, got {keep!r}")
    for key in list(result):
        if key not in keep:
            del result[key]


def _delete_from_primitive_list(result: Obj, key: str, values: Any) -> None:
    if not isinstance(values, list):
        raise PatchError(f"{_DELETE_PRIMITIVE}{key} must be a list")
    current = result.get(key)
    if isinstance(current, list):
        remaining = [v for v in current if v not in values]
        if remaining:
            result[key] = remaining
        else:
            result.pop(key, None)


def _set_element_order(result: Obj, key: str, order: Any, merge_key: MergeKey) -> None:
    """Order the merged list as the patch lists it; elements the patch does not mention
    (the server's own) keep their relative order after the ordered ones."""
    current = result.get(key)
    if not isinstance(order, list) or not isinstance(current, list):
        return

    def identity(item: Any) -> Any:
        if merge_key is not None and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [identity(o) for o in order]
    rank = {value: index for index, value in enumerate(wanted) if _hashable(value)}
    ordered = sorted(
        (item for item in current if _hashable(identity(item)) and identity(item) in rank),
        key=lambda item: rank[identity(item)],
    )
    rest = [item for item in current if not (_hashable(identity(item)) and identity(item) in rank)]
    result[key] = ordered + rest


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None
