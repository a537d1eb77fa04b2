"""`python -m pyccm.provider.openstack.transport.authenticate`: one Keystone authentication, by
keystoneauth1, in a short-lived child process (`child.py` carries the question and answer).

The question (JSON on stdin): `auth_url`, `method` (`password`, `token` or
`application_credential`), `options` (the keystoneauth1 v3 plugin's keyword arguments:
user, project, trust, secret), `interface`, `region`, `services` (catalog types to look
up), `verify` (true, false or a CA file), `cert` (`[cert_file, key_file]` or null),
`tls` (what verifies, for messages), `timeout` (seconds per HTTP request), `user_agent`,
`proxies` (requests' proxy map; the environment is not read here: the parent chose them).

What keystoneauth1 does here and pyccm does not do itself: finding Keystone v3 from
whatever `auth-url` the deployer wrote (`http://host:5000`, `.../identity`, `.../v3`) by
its version discovery, the token request of each v3 plugin (password, token, application
credential, trust scope), and picking each service's URL from the catalog by type,
interface and region. The answer: the token, its expiry (seconds since the epoch), each
service's URL (or null) and the v3 URL found. Refusals are one line naming Keystone's
host: credentials refused, TLS not verified (with the `ca-file` used), no connection.
"""

from __future__ import annotations

import re
import sys
import urllib.parse
import warnings
from typing import TYPE_CHECKING, Any

from pyccm.provider.openstack.transport.child import ChildError, serve

if TYPE_CHECKING:
    from keystoneauth1 import session as ks_session

# An auth URL that already names Keystone v3 (with or without a trailing slash).
_V3_PATH = re.compile(r"/v3/?$")


def main() -> int:
    return serve(authenticate)


def authenticate(question: dict[str, Any]) -> dict[str, Any]:
    from keystoneauth1 import exceptions

    auth_url = str(question["auth_url"])
    where = _host(auth_url)
    try:
        session = _session(question)
        v3_url = _discover_v3(session, auth_url)
        access = _plugin(question, v3_url).get_access(session)
        catalog = access.service_catalog
        endpoints = {
            service: _url_for(catalog, service, question["interface"], question["region"])
            for service in question["services"]
        }
    except exceptions.SSLError as exc:
        raise ChildError(_tls_refusal(where, question, exc)) from None
    except (exceptions.ConnectFailure, exceptions.ConnectTimeout) as exc:
        raise ChildError(f"cannot connect to Keystone at {where}: {_reason(exc)}") from None
    except exceptions.HttpError as exc:
        status = int(exc.http_status or 0) or None
        raise ChildError(
            f"Keystone at {where} answered HTTP {status}: {_reason(exc)}", status=status
        ) from None
    except exceptions.DiscoveryFailure as exc:
        raise ChildError(f"no Keystone v3 API found at {auth_url}: {_reason(exc)}") from None
    except exceptions.ClientException as exc:
        raise ChildError(f"Keystone at {where}: {type(exc).__name__}: {_reason(exc)}") from None
    expires = access.expires
    return {
        "token": access.auth_token,
        "expires_at": expires.timestamp() if expires is not None else None,
        "endpoints": endpoints,
        "v3_url": v3_url,
    }


def _session(question: dict[str, Any]) -> ks_session.Session:
    import requests
    from keystoneauth1 import session as ks_session

    verify = question["verify"]
    if verify is False:
        # The parent warned once at start that tls-insecure is set; urllib3's warning per
        # request would only repeat it on this child's stderr.
        import urllib3

        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
    http = requests.Session()
    http.trust_env = False  # the proxies are the parent's choice, made by pyccm.proxies
    http.proxies = dict(question.get("proxies") or {})
    cert = question.get("cert")
    return ks_session.Session(
        session=http,
        verify=verify,
        cert=tuple(cert) if cert else None,
        timeout=float(question["timeout"]),
        user_agent=str(question["user_agent"]),
    )


def _discover_v3(session: ks_session.Session, auth_url: str) -> str:
    """Keystone v3's URL, by keystoneauth's version discovery of `auth_url`; a URL that
    already ends in `/v3` is taken as it is when its discovery document cannot be read
    (what keystoneauth's generic plugins do too)."""
    from keystoneauth1 import discover, exceptions

    try:
        found = discover.get_discovery(session, auth_url, authenticated=False).url_for((3, 0))
    except exceptions.DiscoveryFailure:
        found = None
    if found:
        return str(found)
    if _V3_PATH.search(auth_url):
        return auth_url
    raise exceptions.DiscoveryFailure("its version document lists no v3")


def _plugin(question: dict[str, Any], v3_url: str) -> Any:
    from keystoneauth1.identity import v3

    options = {key: value for key, value in question["options"].items() if value}
    plugins = {
        "password": v3.Password,
        "token": v3.Token,
        "application_credential": v3.ApplicationCredential,
    }
    return plugins[question["method"]](auth_url=v3_url, reauthenticate=False, **options)


def _url_for(catalog: Any, service: str, interface: str, region: str | None) -> str | None:
    from keystoneauth1 import exceptions

    try:
        url = catalog.url_for(service_type=service, interface=interface, region_name=region)
    except exceptions.EndpointNotFound:
        return None
    return str(url) if url else None


def _host(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts.netloc.rpartition("@")[2] or url


def _tls_refusal(where: str, question: dict[str, Any], exc: Exception) -> str:
    return f"TLS with Keystone at {where} failed ({question['tls']}): {_reason(exc)}"


def _reason(exc: Exception) -> str:
    """The last, most specific part of a library message, on one line."""
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    for marker in ("SSLError(", "NewConnectionError(", "ConnectTimeoutError("):
        if marker in text:
            text = text.rsplit(marker, 1)[1]
    return text.strip(" ()'\"")[:300] or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
