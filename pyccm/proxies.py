"""Which proxy a request goes through, read from the environment by Go's rules.

Upstream's cloud-controller-manager and client-go choose their proxy with Go's
`http.ProxyFromEnvironment` (golang.org/x/net/http/httpproxy); operators' manifests are
written for it, so pyccm reads the same variables the same way:

- `HTTPS_PROXY` for https URLs, `HTTP_PROXY` for http URLs; the upper-case name wins when it
  is set and not empty, else the lower-case one (`https_proxy`, `http_proxy`). No other
  scheme is proxied. A value without a scheme (`proxy.corp:3128`) is `http://`; one that
  is not a URL is ignored (a warning names the variable, never its value).
- `NO_PROXY` (else `no_proxy`): comma-separated, case-insensitive entries, each one of
  `*` (nothing is proxied); an IP address (`192.168.1.1`, `2001:db8::1`); a CIDR
  (`10.0.0.0/8`, `fd00::/64`); a host name, matching itself and its subdomains
  (`example.com` matches `example.com` and `api.example.com`); a host name with a leading
  `.` or `*.`, matching subdomains only (`.example.com` does not match `example.com`); any
  of the address or name forms with `:port` (`10.0.0.1:6443`, `[fd00::1]:443`,
  `example.com:8443`), matching that port only (the URL's, else 80 or 443 by its scheme).
  An IP entry matches only IP addresses, a name entry only names: `NO_PROXY=localhost` does
  not exempt `127.0.0.1` (that one is exempt anyway, below). Malformed entries are skipped.
- A request to `localhost` or to a loopback address (`127.0.0.0/8`, `::1`) never goes
  through a proxy, whatever the variables say.
- When `REQUEST_METHOD` is set (a CGI handler, where `HTTP_PROXY` may come from a request
  header), an http URL that would use `HTTP_PROXY` is refused, as Go refuses it.

The variables are read once, into an immutable `Proxies`; `proxy_for(url)` gives the
`Proxy` (its URL without credentials, and the `Proxy-Authorization` header its
credentials make, as urllib3's `make_headers(proxy_basic_auth=...)` would) or None. The
credentials of `http://user:password@proxy:3128` appear in no repr and no message.

Standard library only: the provider and the Kubernetes client both use it.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The port a URL without one is for, by scheme (Go's).
DEFAULT_PORTS = {"http": "80", "https": "443", "socks5": "1080"}


class ProxyRefused(ValueError):
    """The proxy the environment names may not be used (an http URL in a CGI handler)."""


@dataclass(frozen=True)
class Proxy:
    """A proxy to send requests through."""

    # scheme://host[:port] as given, without credentials: what urllib3's ProxyManager takes.
    url: str
    # The Proxy-Authorization header value its credentials make ("" without credentials).
    authorization: str = field(default="", repr=False)

    @property
    def scheme(self) -> str:
        return self.url.partition("://")[0]

    @property
    def headers(self) -> dict[str, str]:
        """The headers every request through it carries (urllib3's `proxy_headers`)."""
        return {"Proxy-Authorization": self.authorization} if self.authorization else {}


def parse_proxy(value: str) -> Proxy:
    """A proxy URL (`scheme://[user[:password]@]host[:port]`) as a `Proxy`; ValueError, not
    naming the value (it may hold a password), when it has no scheme or no host."""
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        raise ValueError("not a URL") from None
    user_info, at, host_info = parts.netloc.rpartition("@")
    if not parts.scheme or not parts.hostname:
        raise ValueError("not a URL with a scheme and a host")
    try:
        parts.port  # noqa: B018 (checks it)
    except ValueError:
        raise ValueError("its port is not a number") from None
    authorization = ""
    if at:
        # Go's transport: Basic base64(user:password), both percent-decoded, for any userinfo.
        user, _, password = user_info.partition(":")
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode()
    return Proxy(url=f"{parts.scheme}://{host_info}", authorization=authorization)


def _environment_proxy(value: str, name: str) -> Proxy | None:
    """Go's parseProxy: the value, else (when it has no `://`) `http://` + the value; None
    when it is not a URL. (Go retries with `http://` whatever the value, and so turns
    `http://[::1` into a proxy called `http:`; pyccm ignores such a value.)"""
    if not value:
        return None
    candidates = (value,) if "://" in value else (value, "http://" + value)
    for candidate in candidates:
        try:
            return parse_proxy(candidate)
        except ValueError:
            continue
    log.warning("%s is not a proxy URL: ignored", name)
    return None


@dataclass(frozen=True)
class _NoProxy:
    """NO_PROXY, parsed once."""

    everything: bool = False
    # (address or network, port or "" for any)
    addresses: tuple[tuple[IPAddress | IPNetwork, str], ...] = ()
    # (".suffix", port or "", whether the name itself matches too)
    names: tuple[tuple[str, str, bool], ...] = ()

    def exempts(self, host: str, port: str, address: IPAddress | None) -> bool:
        if self.everything:
            return True
        if address is not None:
            return any(
                (address in rule if isinstance(rule, IPNetwork) else address == rule)
                and (not rule_port or rule_port == port)
                for rule, rule_port in self.addresses
            )
        return any(
            (host.endswith(suffix) or (itself and host == suffix[1:]))
            and (not rule_port or rule_port == port)
            for suffix, rule_port, itself in self.names
        )


def _parse_no_proxy(value: str) -> _NoProxy:
    addresses: list[tuple[IPAddress | IPNetwork, str]] = []
    names: list[tuple[str, str, bool]] = []
    for raw in value.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return _NoProxy(everything=True)
        network = _cidr(entry)
        if network is not None:
            addresses.append((network, ""))
            continue
        split = _split_host_port(entry)
        host, port = split if split is not None else (entry, "")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host:
            continue
        address = _ip(host)
        if address is not None:
            addresses.append((address, port))
            continue
        if host.startswith("*."):
            host = host[1:]
        itself = not host.startswith(".")
        names.append(("." + _ascii(host if itself else host[1:]), port, itself))
    return _NoProxy(addresses=tuple(addresses), names=tuple(names))


@dataclass(frozen=True)
class Proxies:
    """The proxy settings of the environment, read once (`from_environment`)."""

    http: Proxy | None = None
    https: Proxy | None = None
    no_proxy: str = ""
    # REQUEST_METHOD is set: HTTP_PROXY is not to be trusted.
    cgi: bool = False
    _rules: _NoProxy = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rules", _parse_no_proxy(self.no_proxy))

    def proxy_for(self, url: str) -> Proxy | None:
        """The proxy a request to `url` goes through, or None for a direct connection.
        Raises `ProxyRefused` for an http URL that would use HTTP_PROXY in a CGI handler,
        ValueError for a URL urllib cannot split (`https://[::1`)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "https":
            proxy = self.https
        elif parts.scheme == "http":
            proxy = self.http
            if proxy is not None and self.cgi:
                raise ProxyRefused(
                    "refusing to use HTTP_PROXY value in CGI environment; "
                    "see golang.org/s/cgihttpproxy"
                )
        else:
            return None
        if proxy is None:
            return None
        host, port = _url_host_port(parts.netloc)
        host = _ascii(host)
        port = port or DEFAULT_PORTS.get(parts.scheme, "")
        return proxy if self._uses_proxy(host, port) else None

    def _uses_proxy(self, host: str, port: str) -> bool:
        # Compared as written, before lower-casing: Go's special case is exactly "localhost".
        if host == "localhost":
            return False
        address = _request_ip(host)
        if address is not None and address.is_loopback:
            return False
        return not self._rules.exempts(host.strip().lower(), port, address)


def from_environment(environ: Mapping[str, str] | None = None) -> Proxies:
    """HTTP_PROXY, HTTPS_PROXY and NO_PROXY (each else its lower-case name) and
    REQUEST_METHOD, from `environ` (the process's environment by default)."""
    env = os.environ if environ is None else environ

    def first(*names: str) -> tuple[str, str]:
        for name in names:
            if env.get(name):
                return env[name], name
        return "", names[0]

    return Proxies(
        http=_environment_proxy(*first("HTTP_PROXY", "http_proxy")),
        https=_environment_proxy(*first("HTTPS_PROXY", "https_proxy")),
        no_proxy=first("NO_PROXY", "no_proxy")[0],
        cgi=bool(env.get("REQUEST_METHOD")),
    )


# --- Go's parsing, in Python -------------------------------------------------------------------


def _url_host_port(netloc: str) -> tuple[str, str]:
    """net/url's Hostname() and Port(): the host without brackets, percent-decoded."""
    host = netloc.rpartition("@")[2]
    port = ""
    colon = host.rfind(":")
    tail = host[colon + 1 :]
    if colon != -1 and (not tail or (tail.isascii() and tail.isdigit())):
        host, port = host[:colon], tail
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return urllib.parse.unquote(host), port


def _split_host_port(value: str) -> tuple[str, str] | None:
    """net.SplitHostPort: (host, port) of `host:port` or `[host]:port`; None otherwise."""
    colon = value.rfind(":")
    if colon < 0:
        return None
    start, after = 0, 0
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or end + 1 != colon:
            return None
        host = value[1:end]
        start, after = 1, end + 1
    else:
        host = value[:colon]
        if ":" in host:
            return None
    if "[" in value[start:] or "]" in value[after:]:
        return None
    return host, value[colon + 1 :]


def _ip(value: str) -> IPAddress | None:
    """net.ParseIP: an IPv4 or IPv6 address (no zone); an IPv4-mapped IPv6 address is its
    IPv4 address (Go compares them equal)."""
    if "%" in value:
        return None
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _request_ip(host: str) -> IPAddress | None:
    """netip.ParseAddr of a request's host: as `_ip`, an IPv6 zone (`fe80::1%eth0`) allowed
    and dropped."""
    address, percent, zone = host.partition("%")
    if percent and (":" not in address or not zone):
        return None
    return _ip(address)


def _cidr(value: str) -> IPNetwork | None:
    """net.ParseCIDR: an address, `/`, a decimal prefix length; host bits may be set."""
    address, slash, bits = value.partition("/")
    if not slash or not (bits.isascii() and bits.isdigit()) or "%" in address:
        return None
    try:
        return ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None


def _ascii(host: str) -> str:
    """A host name in its ASCII (punycode) form; as given when it is ASCII or not a name."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host
