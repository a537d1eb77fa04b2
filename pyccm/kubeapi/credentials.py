"""Who this process is to the API server, as each request needs it: a static identity,
files re-read as they rotate (a token file, client certificate files), or an exec
credential plugin re-run as it expires.

client-go's behaviour, which operators' kubeconfigs and pods are written for:
- a token file (a kubeconfig's `tokenFile`, a pod's service account token) is re-read
  every minute: the kubelet rotates a bound service account token well before it expires,
  and the old one stays valid meanwhile;
- client certificate files (a kubeconfig's `client-certificate` and `client-key`, both
  files: `-data` is static) are re-read at most once a second, as client-go re-reads them
  for each new connection (cert_rotation.go); a changed pair is the identity from then on,
  and the client closes its idle connections, so new ones present it. Requests already
  under way, watches included, finish on their connection (a watch within its 5-10
  minutes), where client-go closes those too within five minutes;
- a re-read that fails (a rotation half written, a mount briefly absent) keeps the last
  value, says so, and is tried again at the next period;
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
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import msgspec

from pyccm import lifetime
from pyccm.kubeapi.errors import KubeConfigError, Unavailable
from pyccm.protocol.decoding import decode_json

log = logging.getLogger(__name__)

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
# client-go's cachingCertificateLoader: certificate files are read at most once a second.
CERTIFICATE_FILE_PERIOD = 1.0

T = TypeVar("T")


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


class Reread(Generic[T]):
    """A value read from files: `initial`, then `read()` again once `period` seconds have
    passed since the last read (when the value is asked for) and on `again()`. A re-read
    that fails (OSError, ValueError) keeps the last value and logs `what` and why."""

    def __init__(
        self,
        initial: T,
        read: Callable[[], T],
        *,
        period: float,
        what: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._value = initial
        self._read = read
        self._period = period
        self._what = what
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at = clock()

    def get(self) -> T:
        with self._lock:
            if self._clock() - self._read_at >= self._period:
                self._reread()
            return self._value

    def again(self) -> T:
        with self._lock:
            self._reread()
            return self._value

    def _reread(self) -> None:
        try:
            value = self._read()
        except (OSError, ValueError) as error:
            log.warning("cannot re-read %s (%s): keeping the last one", self._what, _why(error))
        else:
            # Unchanged, the value kept is the same object (the client's pool key).
            if value != self._value:
                log.info("%s: rotated, using the new one", self._what)
                self._value = value
        self._read_at = self._clock()


class Rotating:
    """An identity with a part in files that rotate: a bearer token from a token file,
    or a client certificate from its files, or both; the other part static."""

    def __init__(
        self,
        *,
        token: Reread[str] | None = None,
        authorization: str = "",
        certificate: Reread[ClientCertificate] | ClientCertificate | None = None,
    ) -> None:
        self._token = token
        self._authorization = authorization
        self._certificate = certificate

    def current(self) -> Identity:
        authorization = bearer(self._token.get()) if self._token else self._authorization
        certificate = self._certificate
        if isinstance(certificate, Reread):
            certificate = certificate.get()
        return Identity(authorization, certificate)

    def refresh(self, stale: Identity) -> Identity:
        """After a 401: the files read again, unless another request already has."""
        identity = self.current()
        if identity != stale:
            return identity
        for part in (self._token, self._certificate):
            if isinstance(part, Reread):
                part.again()
        return self.current()


def token_file(
    path: str, *, period: float, fallback: str = "", clock: Callable[[], float] = time.monotonic
) -> Reread[str]:
    """A token file (`fallback` when it cannot be read now); KubeConfigError without either."""

    def read() -> str:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()

    try:
        token = read()
    except OSError as error:
        if not fallback:
            raise KubeConfigError(f"cannot read the token file {path}: {_why(error)}") from error
        token = fallback
    return Reread(token, read, period=period, what=f"the token file {path}", clock=clock)


def certificate_files(
    initial: ClientCertificate,
    cert_path: str,
    key_path: str,
    *,
    period: float = CERTIFICATE_FILE_PERIOD,
    clock: Callable[[], float] = time.monotonic,
) -> Reread[ClientCertificate]:
    """The client certificate and key in these files, read first as `initial`."""

    def read() -> ClientCertificate:
        certificate = ClientCertificate(Path(cert_path).read_bytes(), Path(key_path).read_bytes())
        check_certificate(certificate)
        return certificate

    what = f"the client certificate {cert_path} and key {key_path}"
    return Reread(initial, read, period=period, what=what, clock=clock)


def check_certificate(certificate: ClientCertificate) -> None:
    """ssl.SSLError (an OSError) unless the certificate and key load together."""
    load_certificate(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), certificate)


def load_certificate(context: ssl.SSLContext, certificate: ClientCertificate) -> None:
    # The ssl module loads a key only from a file: a private directory, gone once loaded.
    with tempfile.TemporaryDirectory(prefix="pyccm-kube-") as scratch:
        cert_file, key_file = Path(scratch) / "client.crt", Path(scratch) / "client.key"
        cert_file.write_bytes(certificate.cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(certificate.key_pem)
        context.load_cert_chain(cert_file, key_file)


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


def _why(error: Exception) -> str:
    if isinstance(error, ssl.SSLError):
        return f"the certificate and key do not load together ({error.reason})"
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)
