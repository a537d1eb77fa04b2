"""Where the API server is and who we are to it: a kubeconfig, or the pod's service account.

pyccm reads these itself rather than through the `kubernetes` package, whose import loads
every one of its API models (about 13 MiB of the manager's memory, bench/results/
tree_memory.md). The rules are client-go's, so a kubeconfig that works for kubectl works
here, and one kubectl refuses is refused here with the same reason:

- a kubeconfig: its `current-context`, that context's cluster and user. Cluster:
  `server`, `certificate-authority` or `certificate-authority-data` (not both),
  `insecure-skip-tls-verify` (not with a CA), `tls-server-name`, `proxy-url`. User:
  `token` or `tokenFile` (re-read every minute), `username`/`password`,
  `client-certificate(-data)` with `client-key(-data)` (two files: re-read as they
  rotate), an `exec` credential plugin (client.authentication.k8s.io v1 or v1beta1).
  Relative paths (files, and an exec command with a `/` in it) are relative to the
  kubeconfig's directory. Refused, one line each: `auth-provider`, impersonation (`as`,
  `as-groups`, ...), a plugin that needs a terminal (`interactiveMode: Always`), and a
  SOCKS `proxy-url`.
- in a pod (no kubeconfig): `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`
  (an IPv6 host in brackets), the service account's `ca.crt` and its `token`, re-read
  every minute as the kubelet rotates it.

The proxy, as client-go's transport picks it: the cluster's `proxy-url` for every
request when the kubeconfig gives one (NO_PROXY does not apply to it), else
`HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` by Go's rules (`pyccm.proxies`), read once, when
the configuration is loaded. http and https proxies; a SOCKS one is refused.

Anything wrong is a `KubeConfigError`: one line naming the file and the field, and never
the token, key or password it holds.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import ssl
import urllib.parse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec
import yaml

from pyccm.kubeapi.credentials import (
    EXEC_API_VERSIONS,
    ClientCertificate,
    Credentials,
    ExecPlugin,
    ExecSpec,
    Identity,
    Reread,
    Rotating,
    Static,
    basic,
    bearer,
    certificate_files,
    check_certificate,
    load_certificate,
    token_file,
)
from pyccm.kubeapi.errors import KubeConfigError
from pyccm.protocol.decoding import decode_json
from pyccm.proxies import Proxies, Proxy, ProxyRefused, from_environment, parse_proxy

log = logging.getLogger(__name__)

# The cluster extension whose content an exec plugin gets as spec.cluster.config.
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
# The proxy schemes client-go accepts in a kubeconfig's proxy-url, and those pyccm can use
# (urllib3 speaks SOCKS only with PySocks, which pyccm does not ship).
PROXY_URL_SCHEMES = ("http", "https", "socks5")
PROXY_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Endpoint:
    """The API server and how to trust it."""

    # scheme://host:port, and the path prefix if the kubeconfig gives one; no trailing /.
    server: str
    # PEM certificates to trust; empty: the system's trust store (as client-go).
    ca_pem: str = ""
    insecure: bool = False
    # The name the server's certificate must carry, when not the server URL's host.
    tls_server_name: str = ""


@dataclass(frozen=True)
class Config:
    endpoint: Endpoint
    credentials: Credentials
    # The proxy every request goes through; None: a direct connection.
    proxy: Proxy | None = None


# --- the kubeconfig, as decoded (unknown fields ignored, as client-go does) ---------------------


class _Extension(msgspec.Struct, frozen=True):
    name: str = ""
    extension: Any = None


class _Cluster(msgspec.Struct, frozen=True, rename="kebab"):
    server: str = ""
    certificate_authority: str = ""
    certificate_authority_data: str = ""
    insecure_skip_tls_verify: bool = False
    tls_server_name: str = ""
    proxy_url: str = ""
    extensions: list[_Extension] | None = None


class _EnvVar(msgspec.Struct, frozen=True):
    name: str = ""
    value: str = ""


class _Exec(msgspec.Struct, frozen=True, rename="camel"):
    api_version: str = ""
    command: str = ""
    args: list[str] | None = None
    env: list[_EnvVar] | None = None
    install_hint: str = ""
    provide_cluster_info: bool = False
    interactive_mode: str = ""


class _User(msgspec.Struct, frozen=True, rename="kebab"):
    token: str = ""
    token_file: str = msgspec.field(default="", name="tokenFile")
    username: str = ""
    password: str = ""
    client_certificate: str = ""
    client_certificate_data: str = ""
    client_key: str = ""
    client_key_data: str = ""
    exec: _Exec | None = None
    auth_provider: Any = None
    as_: str = msgspec.field(default="", name="as")
    as_uid: str = ""
    as_groups: list[str] | None = None
    as_user_extra: Any = None


class _Context(msgspec.Struct, frozen=True):
    cluster: str = ""
    user: str = ""


class _NamedCluster(msgspec.Struct, frozen=True):
    name: str = ""
    cluster: _Cluster | None = None


class _NamedUser(msgspec.Struct, frozen=True):
    name: str = ""
    user: _User | None = None


class _NamedContext(msgspec.Struct, frozen=True):
    name: str = ""
    context: _Context | None = None


class _Kubeconfig(msgspec.Struct, frozen=True, rename="kebab"):
    clusters: list[_NamedCluster] | None = None
    users: list[_NamedUser] | None = None
    contexts: list[_NamedContext] | None = None
    current_context: str = ""


# --- loading -------------------------------------------------------------------------------------


def load(
    *,
    kubeconfig: str,
    service_account_dir: str,
    token_file_period: float,
    exec_timeout: float,
    environment: Proxies | None = None,
) -> Config:
    """The kubeconfig's current context, or the in-cluster configuration when it is "".
    `environment`: the proxy variables (read from the process's environment when None)."""
    if not kubeconfig:
        config = in_cluster(service_account_dir=service_account_dir, period=token_file_period)
    else:
        try:
            config = _from_kubeconfig(
                Path(kubeconfig), period=token_file_period, exec_timeout=exec_timeout
            )
        except KubeConfigError as error:
            raise KubeConfigError(f"kubeconfig {kubeconfig}: {error}") from error
    if config.proxy is None:
        config = replace(config, proxy=_environment_proxy(config.endpoint, environment))
    return config


def _environment_proxy(endpoint: Endpoint, environment: Proxies | None) -> Proxy | None:
    """client-go's default: Go's http.ProxyFromEnvironment for the server's URL."""
    try:
        proxy = (environment or from_environment()).proxy_for(endpoint.server)
    except ProxyRefused as error:
        raise KubeConfigError(str(error)) from None
    except ValueError as error:
        raise KubeConfigError(f"the server {endpoint.server}: {error}") from None
    if proxy is not None and proxy.scheme not in PROXY_SCHEMES:
        variable = "HTTPS_PROXY" if endpoint.server.startswith("https:") else "HTTP_PROXY"
        raise KubeConfigError(
            f"{variable}: {proxy.scheme} proxies are not supported (http and https are)"
        )
    return proxy


def in_cluster(*, service_account_dir: str, period: float) -> Config:
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeConfigError(
            "no --kubeconfig, and not in a pod: KUBERNETES_SERVICE_HOST and "
            "KUBERNETES_SERVICE_PORT are not set"
        )
    directory = Path(service_account_dir)
    # client-go goes on without the CA (the system's trust store) when ca.crt is unusable.
    ca_pem = ""
    try:
        ca_pem = _checked_ca((directory / "ca.crt").read_bytes(), "the service account's ca.crt")
    except (OSError, KubeConfigError) as error:
        log.error(
            "in-cluster: cannot use %s (%s): trusting the system's CAs",
            directory / "ca.crt",
            _reason(error),
        )
    bracketed = f"[{host}]" if ":" in host else host
    endpoint = Endpoint(server=f"https://{bracketed}:{port}", ca_pem=ca_pem)
    try:
        token = token_file(str(directory / "token"), period=period)
    except KubeConfigError as error:
        raise KubeConfigError(f"in-cluster: {error}") from error
    return Config(endpoint=endpoint, credentials=Rotating(token=token))


def _from_kubeconfig(path: Path, *, period: float, exec_timeout: float) -> Config:
    document = _document(path)
    name = document.current_context
    if not name:
        raise KubeConfigError("no current-context")
    context = _named(document.contexts, name, "context") or _Context()
    if not context.cluster:
        raise KubeConfigError(f"context {name!r} names no cluster")
    cluster = _named(document.clusters, context.cluster, "cluster") or _Cluster()
    user = _named(document.users, context.user, "user") if context.user else None
    base = path.resolve().parent
    endpoint = _endpoint(cluster, context.cluster, base, has_cert=_has_certificate(user))
    proxy = _proxy_url(cluster.proxy_url, f"cluster {context.cluster!r}")
    credentials = _credentials(
        user or _User(),
        context.user,
        base,
        endpoint=endpoint,
        cluster=cluster,
        period=period,
        exec_timeout=exec_timeout,
    )
    return Config(endpoint=endpoint, credentials=credentials, proxy=proxy)


def _proxy_url(value: str, where: str) -> Proxy | None:
    """A cluster's proxy-url, checked as client-go checks it (never quoted: it may hold a
    password)."""
    if not value:
        return None
    where = f"{where}: proxy-url"
    try:
        scheme = urllib.parse.urlsplit(value).scheme
        proxy = parse_proxy(value) if scheme in PROXY_URL_SCHEMES else None
    except ValueError as error:
        raise KubeConfigError(f"{where} is not a proxy URL ({error})") from None
    if proxy is None:
        raise KubeConfigError(
            f"{where}: unsupported scheme {scheme!r}, must be http, https, or socks5"
        )
    if proxy.scheme not in PROXY_SCHEMES:
        raise KubeConfigError(
            f"{where}: {proxy.scheme} proxies are not supported (http and https are)"
        )
    return proxy


def _document(path: Path) -> _Kubeconfig:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise KubeConfigError(f"cannot read it: {_reason(error)}") from error
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        # The parser's own message can quote the line it stopped at: a token, a key.
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise KubeConfigError(f"not valid YAML{where}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise KubeConfigError("not a kubeconfig (a YAML mapping with clusters, users, contexts)")
    try:
        return decode_json(msgspec.json.encode(data), _Kubeconfig)
    except (msgspec.DecodeError, TypeError) as error:
        # msgspec names the field and the type expected, never the value.
        raise KubeConfigError(str(error)) from None


def _named(entries: list[Any] | None, name: str, kind: str) -> Any:
    """The first entry called `name` (its inner object), as client-go keeps the first."""
    for entry in entries or ():
        if entry.name == name:
            return getattr(entry, kind)
    raise KubeConfigError(f"{kind} {name!r} is not defined")


def _has_certificate(user: _User | None) -> bool:
    return user is not None and bool(
        user.client_certificate or user.client_certificate_data or user.exec
    )


def _endpoint(cluster: _Cluster, name: str, base: Path, *, has_cert: bool) -> Endpoint:
    where = f"cluster {name!r}"
    if not cluster.server:
        raise KubeConfigError(f"{where} has no server")
    try:
        urllib.parse.urlsplit(cluster.server)
    except ValueError as error:
        raise KubeConfigError(f"{where}: server {cluster.server} is not a URL ({error})") from None
    if cluster.certificate_authority and cluster.certificate_authority_data:
        raise KubeConfigError(
            f"{where}: certificate-authority-data and certificate-authority are both given"
        )
    has_ca = bool(cluster.certificate_authority or cluster.certificate_authority_data)
    if cluster.insecure_skip_tls_verify and has_ca:
        raise KubeConfigError(
            f"{where}: a certificate authority with insecure-skip-tls-verify is not allowed"
        )
    ca_pem = ""
    if cluster.certificate_authority_data:
        data = _base64(cluster.certificate_authority_data, f"{where}: certificate-authority-data")
        ca_pem = _checked_ca(data, f"{where}: certificate-authority-data")
    elif cluster.certificate_authority:
        file = _file(base, cluster.certificate_authority, f"{where}: certificate-authority")
        ca_pem = _checked_ca(file, f"{where}: certificate-authority")
    server = cluster.server.rstrip("/")
    if "://" not in server:
        # client-go's default scheme: https when anything about TLS is configured.
        tls = has_ca or cluster.insecure_skip_tls_verify or has_cert
        server = f"{'https' if tls else 'http'}://{server}"
    return Endpoint(
        server=server,
        ca_pem=ca_pem,
        insecure=cluster.insecure_skip_tls_verify,
        tls_server_name=cluster.tls_server_name,
    )


def _credentials(
    user: _User,
    name: str,
    base: Path,
    *,
    endpoint: Endpoint,
    cluster: _Cluster,
    period: float,
    exec_timeout: float,
) -> Credentials:
    where = f"user {name!r}"
    _refuse_unsupported(user, where)
    certificate = _certificate(user, base, where)
    if user.exec is not None:
        # Beside a plugin, certificate files are read once (client-go would re-read them).
        static = certificate.get() if isinstance(certificate, Reread) else certificate
        spec = _exec_spec(user.exec, base, where, endpoint=endpoint, cluster=cluster)
        return ExecPlugin(_with_certificate(spec, static), timeout=exec_timeout)
    if user.token_file:
        path = _path(base, user.token_file)
        try:
            token = token_file(path, period=period, fallback=user.token)
        except KubeConfigError as error:
            raise KubeConfigError(f"{where}: {error}") from error
        return Rotating(token=token, certificate=certificate)
    authorization = ""
    if user.token:
        authorization = bearer(user.token)
    elif user.username or user.password:
        authorization = basic(user.username, user.password)
    if isinstance(certificate, Reread):
        return Rotating(authorization=authorization, certificate=certificate)
    return Static(Identity(authorization, certificate))


def _refuse_unsupported(user: _User, where: str) -> None:
    if user.auth_provider is not None:
        raise KubeConfigError(
            f"{where}: auth-provider is not supported; use an exec credential plugin "
            "(client-go dropped the gcp and azure providers in 1.26)"
        )
    if user.as_ or user.as_uid or user.as_groups or user.as_user_extra:
        raise KubeConfigError(
            f"{where}: impersonation (as, as-uid, as-groups, as-user-extra) is not supported"
        )
    methods = [
        method
        for method, present in (
            ("token", bool(user.token or user.token_file)),
            ("basicAuth", bool(user.username or user.password)),
            ("exec", user.exec is not None),
        )
        if present
    ]
    if len(methods) > 1:
        raise KubeConfigError(
            f"{where}: more than one authentication method ({', '.join(methods)}); give one"
        )


def _certificate(
    user: _User, base: Path, where: str
) -> Reread[ClientCertificate] | ClientCertificate | None:
    """The user's client certificate: re-read as it rotates when both parts are files."""
    if user.client_certificate and user.client_certificate_data:
        raise KubeConfigError(
            f"{where}: client-certificate-data and client-certificate are both given"
        )
    if user.client_key and user.client_key_data:
        raise KubeConfigError(f"{where}: client-key-data and client-key are both given")
    has_cert = bool(user.client_certificate or user.client_certificate_data)
    has_key = bool(user.client_key or user.client_key_data)
    if has_cert != has_key:
        given, missing = ("certificate", "key") if has_cert else ("key", "certificate")
        raise KubeConfigError(
            f"{where}: a client {given} without its {missing} (client-{missing}-data or "
            f"client-{missing})"
        )
    if not has_cert:
        return None
    cert = (
        _base64(user.client_certificate_data, f"{where}: client-certificate-data")
        if user.client_certificate_data
        else _file(base, user.client_certificate, f"{where}: client-certificate")
    )
    key = (
        _base64(user.client_key_data, f"{where}: client-key-data")
        if user.client_key_data
        else _file(base, user.client_key, f"{where}: client-key")
    )
    certificate = ClientCertificate(cert, key)
    try:
        check_certificate(certificate)
    except ssl.SSLError as error:
        raise KubeConfigError(
            f"{where}: the client certificate and key do not load together ({error.reason})"
        ) from None
    if user.client_certificate and user.client_key:
        # client-go's ReloadTLSFiles: both parts files, neither data.
        return certificate_files(
            certificate, _path(base, user.client_certificate), _path(base, user.client_key)
        )
    return certificate


def _exec_spec(
    config: _Exec, base: Path, where: str, *, endpoint: Endpoint, cluster: _Cluster
) -> ExecSpec:
    where = f"{where}: exec"
    if config.api_version not in EXEC_API_VERSIONS:
        raise KubeConfigError(
            f"{where}: apiVersion {config.api_version or '(none)'} is not one of "
            f"{', '.join(EXEC_API_VERSIONS)}"
        )
    if not config.command:
        raise KubeConfigError(f"{where}: no command")
    mode = config.interactive_mode
    if not mode and config.api_version.endswith("/v1"):
        raise KubeConfigError(f"{where}: interactiveMode must be given (Never or IfAvailable)")
    if mode and mode not in ("Never", "IfAvailable", "Always"):
        raise KubeConfigError(
            f"{where}: interactiveMode {mode!r} is not Never, IfAvailable or Always"
        )
    if mode == "Always":
        raise KubeConfigError(
            f"{where}: interactiveMode Always needs a terminal, which pyccm does not have"
        )
    env = {}
    for variable in config.env or ():
        if not variable.name:
            raise KubeConfigError(f"{where}: an env entry without a name")
        env[variable.name] = variable.value
    # client-go: a command with a / in it is relative to the kubeconfig; a bare name is
    # looked up in PATH.
    command = _path(base, config.command) if "/" in config.command else config.command
    return ExecSpec(
        api_version=config.api_version,
        command=command,
        args=tuple(config.args or ()),
        env=env,
        install_hint=config.install_hint,
        cluster=_exec_cluster(endpoint, cluster) if config.provide_cluster_info else None,
    )


def _with_certificate(spec: ExecSpec, certificate: ClientCertificate | None) -> ExecSpec:
    return spec if certificate is None else replace(spec, certificate=certificate)


def _exec_cluster(endpoint: Endpoint, cluster: _Cluster) -> dict[str, object]:
    """spec.cluster of the ExecCredential (provideClusterInfo), as client-go fills it."""
    info: dict[str, object] = {"server": endpoint.server}
    if endpoint.tls_server_name:
        info["tls-server-name"] = endpoint.tls_server_name
    if endpoint.insecure:
        info["insecure-skip-tls-verify"] = True
    if endpoint.ca_pem:
        info["certificate-authority-data"] = base64.b64encode(endpoint.ca_pem.encode()).decode()
    if cluster.proxy_url:
        info["proxy-url"] = cluster.proxy_url
    # client-go always sends `config`: null without the extension.
    info["config"] = next(
        (e.extension for e in cluster.extensions or () if e.name == EXEC_EXTENSION), None
    )
    return info


# --- files and PEM -------------------------------------------------------------------------------


def _path(base: Path, value: str) -> str:
    """A kubeconfig's path: absolute as given, relative to the kubeconfig's directory."""
    return value if os.path.isabs(value) else str(base / value)


def _file(base: Path, value: str, what: str) -> bytes:
    path = _path(base, value)
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise KubeConfigError(f"{what}: cannot read {path}: {_reason(error)}") from error


def _base64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise KubeConfigError(f"{what} is not base64") from None


def _checked_ca(data: bytes, what: str) -> str:
    pem = data.decode("ascii", errors="replace")
    try:
        ssl.create_default_context(cadata=pem)
    except (ssl.SSLError, ValueError):
        raise KubeConfigError(f"{what} holds no PEM certificate") from None
    return pem


def ssl_context(endpoint: Endpoint, certificate: ClientCertificate | None) -> ssl.SSLContext:
    """The TLS settings of a connection to `endpoint` presenting `certificate`."""
    context = (
        ssl.create_default_context(cadata=endpoint.ca_pem)
        if endpoint.ca_pem
        else ssl.create_default_context()
    )
    if endpoint.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if certificate is not None:
        load_certificate(context, certificate)
    return context


def _reason(error: Exception) -> str:
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)
