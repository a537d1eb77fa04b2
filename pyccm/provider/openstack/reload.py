"""What a reload of `cloud.conf` needs besides parsing: noticing a change, and saying what
was wrong with a bad file without quoting it.

Upstream reads `cloud.conf` once; a new password or a new `[LoadBalancer]` default needs a
restart of every replica (cloud-provider-openstack#2284, kubernetes/kubernetes#62376). A
pyccm worker polls instead (`OpenStackCloud.reload_config`), and this module gives it:

* `digest`: one SHA-256 over the bytes of every file the settings came from. Content, not
  modification times or inotify: Kubernetes updates a mounted Secret by pointing the
  `..data` symlink at a new directory, which neither an mtime nor a watch on the file's
  old inode sees, while reading the path again always follows the link;
* `without_values`: a `ConfigError`'s message with every value of the new file hidden.
  `load_settings` applies it to every error, at start and at reload: the
  file may be a half-edited Secret, so the one log line names the file, line, section and
  key, says what is wrong, and never shows a value, a secret least of all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from pyccm.provider.errors import ConfigError
from pyccm.provider.openstack.gcfg import parse_ini

HIDDEN = "(value hidden)"


def digest(paths: Iterable[Path]) -> str:
    """A SHA-256 over the files' names and bytes; a missing or unreadable file counts as
    its own state, so its reappearance is a change too."""
    hashed = hashlib.sha256()
    for path in paths:
        hashed.update(str(path).encode() + b"\0")
        try:
            hashed.update(b"+" + path.read_bytes())
        except OSError as exc:
            hashed.update(b"-" + type(exc).__name__.encode())
        hashed.update(b"\0")
    return hashed.hexdigest()


def _values(path: Path) -> set[str]:
    """Every value assigned in the file, and each comma-separated part of one (the checks
    of list-valued keys quote a single item)."""
    try:
        document = parse_ini(path.read_text(encoding="utf-8"), path=path)
    except (ConfigError, OSError, UnicodeDecodeError):
        return set()  # a syntax error's message never quotes the line
    found: set[str] = set()
    for keys in document.sections.values():
        for assignments in keys.values():
            for raw in assignments:
                if raw.text:
                    found.add(raw.text)
                    found.update(part.strip() for part in raw.text.split(","))
    return found


def without_values(error: ConfigError, *, path: Path, secrets: Iterable[str] = ()) -> str:
    """`error`'s message with every value of `path` (as the message quotes it) and every
    one of `secrets` (wherever it appears) replaced."""
    message = str(error)
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        message = message.replace(secret, HIDDEN)
    for value in sorted(_values(path), key=len, reverse=True):
        if value:
            message = message.replace(repr(value), HIDDEN)
    return message
