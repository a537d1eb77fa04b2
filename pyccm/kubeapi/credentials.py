"""Who this process is to the API server, as each request needs it: a static identity, a
token file re-read as it rotates, or an exec credential plugin re-run as it expires.

client-go's behaviour, which operators' kubeconfigs and pods are written for:
- a token file (a kubeconfig's `tokenFile`, a pod's service account token) is re-read
  every minute: the kubelet rotates a bound service account token well before it expires,
  and the old one stays valid meanwhile;
- an exec plugin (client.authentication.k8s.io v1 and v1beta1) runs on first use, with
  `KUBERNETES_EXEC_INFO` in its environment; its ExecCredential gives a bearer token or a
  client certificate and key, kept until its `expirationTimestamp` (for the process's life
  without one), then the plugin runs again;
- a 401 makes a refreshable source refresh (the plugin re-runs, the file is re-read), so a
  credential revoked early is replaced on the next request; the client retries the request
  once when that gives a new identity.

No secret is ever part of a message: errors name the file, the command and what was wrong.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from pyccm import lifetime
from pyccm.kubeapi.errors import KubeConfigError, Unavailable
from pyccm.protocol.decoding import decode_json

log = logging.getLogger(__name__)

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


@dataclass(frozen=True)
class ClientCertificate:
    """A PEM certificate (chain) and its private key, for TLS client authentication."""

    cert_pem: bytes = field(repr=False)
    key_pem: bytes = field(repr=False)


@dataclass(frozen=True)
class Identity:
    """What a request carries: an Authorization header value ("" for none) and the client
    certificate the connection presents (None for none)."""

    authorization: str = field(default="", repr=False)
    certificate: ClientCertificate | None = None


class Credentials(Protocol):
    def current(self) -> Identity:
        """The identity for the next request; `Unavailable` when it cannot be had now."""
        ...

    def refresh(self, stale: Identity) -> Identity:
        """After a 401 answered `stale`: a fresh identity (the same when there is none)."""
        ...


def bearer(token: str) -> str:
    return f"Bearer {token}"


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@dataclass(frozen=True)
class Static:
    """A token, a username and password, a client certificate, or none: never changes."""

    identity: Identity

    def current(self) -> Identity:
        return self.identity

    def refresh(self, stale: Identity) -> Identity:
        return self.identity


class TokenFile:
    """A bearer token read from `path`, re-read once `period` seconds have passed since the
    last read and after a 401. A failed re-read keeps the last token (the kubelet writes
    the file by rename, but a mount can be briefly absent) and says so."""

    def __init__(
        self,
        path: str,
        *,
        period: float,
        certificate: ClientCertificate | None = None,
        fallback: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._path = path
        self._period = period
        self._certificate = certificate
        self._clock = clock
        self._lock = threading.Lock()
        try:
            token = self._read()
        except OSError as error:
            if not fallback:
                raise KubeConfigError(
                    f"cannot read the token file {path}: {_why(error)}"
                ) from error
            token = fallback
        self._identity = Identity(bearer(token), certificate)
        self._read_at = clock()

    def _read(self) -> str:
        with open(self._path, encoding="utf-8") as handle:
            return handle.read().strip()

    def _reread(self) -> Identity:
        try:
            token = self._read()
        except OSError as error:
            log.warning(
                "cannot re-read the token file %s (%s): keeping the last token",
                self._path,
                _why(error),
            )
        else:
            self._identity = Identity(bearer(token), self._certificate)
        self._read_at = self._clock()
        return self._identity

    def current(self) -> Identity:
        with self._lock:
            if self._clock() - self._read_at < self._period:
                return self._identity
            return self._reread()

    def refresh(self, stale: Identity) -> Identity:
        with self._lock:
            if self._identity != stale:
                return self._identity
            return self._reread()


@dataclass(frozen=True)
class ExecSpec:
    """A kubeconfig user's `exec` section, checked, with its command resolved."""

    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    install_hint: str = ""
    # The ExecCredential's spec.cluster (provideClusterInfo), or None.
    cluster: Mapping[str, object] | None = None
    # A static client certificate the user also has (used when the plugin gives a token).
    certificate: ClientCertificate | None = None


class _Status(msgspec.Struct, frozen=True, rename="camel"):
    token: str = ""
    client_certificate_data: str = ""
    client_key_data: str = ""
    expiration_timestamp: str = ""


class _ExecCredential(msgspec.Struct, frozen=True, rename="camel"):
    api_version: str = ""
    kind: str = ""
    status: _Status | None = None


class ExecPlugin:
    """Runs the plugin on first use, again once its credential has expired or after a 401.
    One run at a time: the threads that need it meanwhile wait for its answer."""

    def __init__(
        self,
        spec: ExecSpec,
        *,
        timeout: float,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._spec = spec
        self._timeout = timeout
        self._now = now
        self._lock = threading.Lock()
        self._identity: Identity | None = None
        self._expires: datetime.datetime | None = None

    def current(self) -> Identity:
        with self._lock:
            if self._identity is not None and (
                self._expires is None or self._now() < self._expires
            ):
                return self._identity
            return self._run()

    def refresh(self, stale: Identity) -> Identity:
        with self._lock:
            if self._identity is not None and self._identity != stale:
                return self._identity
            return self._run()

    def _run(self) -> Identity:
        spec = self._spec
        info = {"apiVersion": spec.api_version, "kind": "ExecCredential", "spec": _spec(spec)}
        environment = {**os.environ, **spec.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        name = os.path.basename(spec.command)
        try:
            # stdin is never a terminal here: the plugin cannot prompt (interactiveMode).
            done = subprocess.run(
                [spec.command, *spec.args],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                timeout=self._timeout,
                check=False,
                **lifetime.tied(),
            )
        except FileNotFoundError as error:
            hint = f" ({spec.install_hint.strip()})" if spec.install_hint.strip() else ""
            raise Unavailable(f"exec plugin {name}: command not found{hint}") from error
        except subprocess.TimeoutExpired as error:
            raise Unavailable(f"exec plugin {name}: no answer in {self._timeout:g}s") from error
        except OSError as error:
            raise Unavailable(f"exec plugin {name}: {_why(error)}") from error
        if done.returncode != 0:
            raise Unavailable(f"exec plugin {name}: exit status {done.returncode}")
        identity, expires = _credential(done.stdout, spec, name)
        self._identity, self._expires = identity, expires
        log.info(
            "exec plugin %s: new credentials%s",
            name,
            f" until {expires.isoformat()}" if expires else "",
        )
        return identity


def _spec(spec: ExecSpec) -> dict[str, object]:
    return {"interactive": False, **({"cluster": dict(spec.cluster)} if spec.cluster else {})}


def _credential(
    output: bytes, spec: ExecSpec, name: str
) -> tuple[Identity, datetime.datetime | None]:
    """The identity in the plugin's ExecCredential and when it expires."""
    try:
        credential = decode_json(output, _ExecCredential)
    except msgspec.DecodeError as error:
        raise Unavailable(f"exec plugin {name}: its output is not an ExecCredential") from error
    if credential.kind != "ExecCredential" or credential.api_version != spec.api_version:
        raise Unavailable(
            f"exec plugin {name}: answered {credential.api_version or '?'} "
            f"{credential.kind or '?'}, not {spec.api_version} ExecCredential"
        )
    status = credential.status
    if status is None:
        raise Unavailable(f"exec plugin {name}: its ExecCredential has no status")
    certificate = spec.certificate
    if bool(status.client_certificate_data) != bool(status.client_key_data):
        raise Unavailable(f"exec plugin {name}: a client certificate without its key")
    if status.client_certificate_data:
        certificate = ClientCertificate(
            status.client_certificate_data.encode(), status.client_key_data.encode()
        )
    elif not status.token:
        raise Unavailable(f"exec plugin {name}: neither a token nor a client certificate")
    authorization = bearer(status.token) if status.token else ""
    return Identity(authorization, certificate), _expiry(status.expiration_timestamp, name)


def _expiry(stamp: str, name: str) -> datetime.datetime | None:
    if not stamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError as error:
        raise Unavailable(f"exec plugin {name}: expirationTimestamp is not RFC 3339") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _why(error: OSError) -> str:
    return error.strerror or type(error).__name__
