"""pyccm.proxies against the rules Go's httpproxy documents and tests (what upstream's CCM
and client-go do with HTTP_PROXY, HTTPS_PROXY and NO_PROXY): each row is one request URL
under one environment, and the proxy it must go through (None: a direct connection)."""

from __future__ import annotations

import base64
import logging

import pytest
import urllib3

from pyccm.proxies import Proxies, Proxy, ProxyRefused, from_environment, parse_proxy

# (environment, request URL, the proxy URL expected or None)
Row = tuple[dict[str, str], str, str | None]

PROXY_VALUES: list[Row] = [
    # A value without a scheme is http://; one with a scheme keeps it, whatever it is.
    ({"HTTP_PROXY": "127.0.0.1:8080"}, "http://example.com", "http://127.0.0.1:8080"),
    (
        {"HTTP_PROXY": "cache.corp.example.com:1234"},
        "http://example.com",
        "http://cache.corp.example.com:1234",
    ),
    (
        {"HTTP_PROXY": "cache.corp.example.com"},
        "http://example.com",
        "http://cache.corp.example.com",
    ),
    ({"HTTP_PROXY": "localhost"}, "http://example.com", "http://localhost"),
    (
        {"HTTP_PROXY": "https://cache.corp.example.com"},
        "http://example.com",
        "https://cache.corp.example.com",
    ),
    ({"HTTP_PROXY": "http://127.0.0.1:8080"}, "http://example.com", "http://127.0.0.1:8080"),
    ({"HTTP_PROXY": "https://127.0.0.1:8080"}, "http://example.com", "https://127.0.0.1:8080"),
    ({"HTTP_PROXY": "socks5://127.0.0.1"}, "http://example.com", "socks5://127.0.0.1"),
    ({"HTTP_PROXY": "foo://host"}, "http://example.com", "foo://host"),
    # The scheme of the request picks the variable; no other scheme is proxied.
    (
        {"HTTP_PROXY": "http.proxy.tld", "HTTPS_PROXY": "secure.proxy.tld"},
        "http://insecure.tld/",
        "http://http.proxy.tld",
    ),
    (
        {"HTTP_PROXY": "http.proxy.tld", "HTTPS_PROXY": "secure.proxy.tld"},
        "https://secure.tld/",
        "http://secure.proxy.tld",
    ),
    (
        {"HTTP_PROXY": "http.proxy.tld", "HTTPS_PROXY": "https://secure.proxy.tld"},
        "https://secure.tld/",
        "https://secure.proxy.tld",
    ),
    ({"HTTP_PROXY": "http.proxy.tld"}, "https://secure.tld/", None),
    ({"HTTP_PROXY": "http.proxy.tld"}, "ftp://insecure.tld/", None),
    ({}, "http://example.com", None),
    # A value that is no URL either way is ignored.
    ({"HTTPS_PROXY": "http://[::1"}, "https://example.com", None),
]

NO_PROXY_NAMES: list[Row] = [
    ({"HTTP_PROXY": "proxy", "NO_PROXY": "example.com"}, "http://example.com/", None),
    ({"HTTP_PROXY": "proxy", "NO_PROXY": ".example.com"}, "http://example.com/", "http://proxy"),
    ({"HTTP_PROXY": "proxy", "NO_PROXY": "ample.com"}, "http://example.com/", "http://proxy"),
    ({"HTTP_PROXY": "proxy", "NO_PROXY": "example.com"}, "http://foo.example.com/", None),
    ({"HTTP_PROXY": "proxy", "NO_PROXY": ".foo.com"}, "http://example.com/", "http://proxy"),
    # Internationalised names compare in their ASCII form, either side.
    ({"HTTP_PROXY": "proxy", "NO_PROXY": ".示例.com"}, "http://www.示例.com", None),
    ({"HTTP_PROXY": "proxy", "NO_PROXY": "xn--fsq092h.com"}, "http://www.示例.com", None),
    ({"HTTP_PROXY": "proxy", "NO_PROXY": "示例.com"}, "http://www.xn--fsq092h.com", None),
    # An IPv6 zone is not a name: it does not match a name entry.
    (
        {"HTTP_PROXY": "proxy", "NO_PROXY": "example.com"},
        "http://[1000::%25.example.com]:123",
        "http://proxy",
    ),
    # Case does not matter, in the entry or in the URL.
    ({"HTTP_PROXY": "proxy", "NO_PROXY": "EXAMPLE.com"}, "http://Api.Example.COM/", None),
    # A port in the URL, or the scheme's default, against an entry's port.
    (
        {"HTTPS_PROXY": "proxy", "NO_PROXY": "kube.example.com:6443"},
        "https://kube.example.com:6443/api",
        None,
    ),
    (
        {"HTTPS_PROXY": "proxy", "NO_PROXY": "kube.example.com:6443"},
        "https://kube.example.com/api",
        "http://proxy",
    ),
    (
        {"HTTPS_PROXY": "proxy", "NO_PROXY": "kube.example.com:443"},
        "https://kube.example.com/api",
        None,
    ),
]

# Go's own NO_PROXY list for its useProxy table, and each host, asked for on port 80.
GO_NO_PROXY = (
    "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, "
    "10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, "
    "2002:db8:a::45/64"
)
# (host, whether it goes through the proxy)
GO_HOSTS: list[tuple[str, bool]] = [
    # Never proxied: localhost and loopback addresses.
    ("localhost", False),
    ("127.0.0.1", False),
    ("127.0.0.2", False),
    ("[::1]", False),
    ("[::2]", True),
    ("[::ffff:127.0.0.1]", False),
    ("192.168.1.1", False),  # the address
    ("192.168.1.2", True),  # the address, another port
    ("192.168.1.3", False),  # the address and the port
    ("192.168.1.4", True),
    ("10.0.0.2", False),  # in the CIDR
    ("10.0.0.4", True),  # just past it
    ("[::ffff:10.0.0.2]", False),  # IPv4-mapped: the IPv4 address
    ("[2001:db8::52:0:1]", False),
    ("[2001:db8::52:0:2]", True),
    ("[2001:db8::52:0:3]", False),
    ("[2002:db8:a::123]", False),  # in the IPv6 CIDR
    ("[fe80::424b:c8be:1643:a1b6]", True),
    ("barbaz.net", True),  # .barbaz.net: subdomains only
    ("www.barbaz.net", False),
    ("foobar.com", False),
    ("www.foobar.com", False),
    ("foofoobar.com", True),  # not a subdomain
    ("baz.com", True),
    ("localhost.net", True),
    ("local.localhost", True),
    ("barbarbaz.net", True),
    ("wildcard.io", True),  # *.wildcard.io: subdomains only
    ("nested.wildcard.io", False),
    ("awildcard.io", True),
]


def _proxy_url(environ: dict[str, str], url: str) -> str | None:
    proxy = from_environment(environ).proxy_for(url)
    return None if proxy is None else proxy.url


@pytest.mark.parametrize(("environ", "url", "expected"), PROXY_VALUES + NO_PROXY_NAMES)
def test_the_proxy_for_a_url_is_gos(
    environ: dict[str, str], url: str, expected: str | None
) -> None:
    assert _proxy_url(environ, url) == expected


@pytest.mark.parametrize(("host", "proxied"), GO_HOSTS)
def test_no_proxy_entries_match_as_go_matches_them(host: str, proxied: bool) -> None:
    environ = {"HTTP_PROXY": "proxy:3128", "NO_PROXY": GO_NO_PROXY}
    expected = "http://proxy:3128" if proxied else None
    assert _proxy_url(environ, f"http://{host}:80/") == expected


@pytest.mark.parametrize(("host", "_"), GO_HOSTS)
def test_a_star_proxies_nothing(host: str, _: bool) -> None:
    assert _proxy_url({"HTTP_PROXY": "proxy", "NO_PROXY": "*"}, f"http://{host}:80/") is None


@pytest.mark.parametrize(
    "no_proxy",
    [":1", ",", " , ", "[]:80", "10.0.0.0/", "10.0.0.0/x", "[::1", "a]:80", "1.2.3.4%eth0"],
)
def test_malformed_entries_are_skipped(no_proxy: str) -> None:
    assert _proxy_url({"HTTP_PROXY": "proxy", "NO_PROXY": no_proxy}, "http://example.com/") == (
        "http://proxy"
    )


def test_an_ip_entry_does_not_match_a_name_nor_a_name_entry_an_ip() -> None:
    environ = {"HTTPS_PROXY": "proxy", "NO_PROXY": "10.1.2.3,kube.internal"}
    assert _proxy_url(environ, "https://10.1.2.3/") is None
    assert _proxy_url(environ, "https://kube.internal/") is None
    # The name "10.1.2.3.nip.io" is a name; "localhost" is not special in NO_PROXY.
    assert _proxy_url(environ, "https://10.1.2.3.nip.io/") == "http://proxy"
    assert (
        _proxy_url({"HTTPS_PROXY": "proxy", "NO_PROXY": "kube.internal"}, "https://[fd00::1]/")
        == "http://proxy"
    )


def test_localhost_is_exempt_only_as_written() -> None:
    # Go compares the URL's host with "localhost" before lower-casing it.
    assert _proxy_url({"HTTP_PROXY": "proxy"}, "http://localhost:8080/") is None
    assert _proxy_url({"HTTP_PROXY": "proxy"}, "http://LOCALHOST:8080/") == "http://proxy"


@pytest.mark.parametrize(
    ("environ", "http", "https", "no_proxy"),
    [
        ({"HTTP_PROXY": "a", "http_proxy": "b"}, "http://a", None, ""),
        ({"http_proxy": "b"}, "http://b", None, ""),
        ({"HTTP_PROXY": "", "http_proxy": "b"}, "http://b", None, ""),
        ({"HTTPS_PROXY": "s", "https_proxy": "t"}, None, "http://s", ""),
        ({"https_proxy": "t"}, None, "http://t", ""),
        ({"NO_PROXY": "x", "no_proxy": "y"}, None, None, "x"),
        ({"NO_PROXY": "", "no_proxy": "y"}, None, None, "y"),
    ],
)
def test_the_upper_case_variable_wins_when_set_and_not_empty(
    environ: dict[str, str], http: str | None, https: str | None, no_proxy: str
) -> None:
    proxies = from_environment(environ)
    assert (proxies.http and proxies.http.url) == http
    assert (proxies.https and proxies.https.url) == https
    assert proxies.no_proxy == no_proxy


def test_a_cgi_handler_refuses_http_proxy_for_http_only() -> None:
    proxies = from_environment(
        {"HTTP_PROXY": "http://10.1.2.3:8080", "HTTPS_PROXY": "https://s", "REQUEST_METHOD": "PUT"}
    )
    with pytest.raises(ProxyRefused, match="CGI"):
        proxies.proxy_for("http://example.com/")
    assert (
        _proxy_url({"HTTPS_PROXY": "https://s", "REQUEST_METHOD": "PUT"}, "https://e/")
        == "https://s"
    )


def test_read_once() -> None:
    environ = {"HTTPS_PROXY": "proxy"}
    proxies = from_environment(environ)
    environ["HTTPS_PROXY"] = "other"
    environ["NO_PROXY"] = "*"
    assert proxies.proxy_for("https://example.com/") == Proxy("http://proxy")


SECRET = "s3cr3t-passw0rd"


def test_credentials_become_the_proxy_authorization_urllib3_would_send() -> None:
    proxy = parse_proxy(f"http://user:{SECRET}@proxy.corp:3128")
    assert proxy.url == "http://proxy.corp:3128"
    assert proxy.headers == {"Proxy-Authorization": f"Basic {_basic('user', SECRET)}"}
    expected = urllib3.make_headers(proxy_basic_auth=f"user:{SECRET}")
    assert {k.lower(): v for k, v in proxy.headers.items()} == expected


def test_credentials_are_percent_decoded_and_a_user_alone_has_an_empty_password() -> None:
    assert parse_proxy("http://us%40er:p%3Ass@proxy").headers["Proxy-Authorization"] == (
        "Basic " + _basic("us@er", "p:ss")
    )
    assert parse_proxy("http://user@proxy").headers["Proxy-Authorization"] == (
        "Basic " + _basic("user", "")
    )
    assert parse_proxy("http://proxy:3128").headers == {}


def test_credentials_appear_in_no_repr_and_no_message(caplog: pytest.LogCaptureFixture) -> None:
    environ = {"HTTPS_PROXY": f"http://user:{SECRET}@proxy:3128", "HTTP_PROXY": f"::{SECRET}:["}
    with caplog.at_level(logging.DEBUG):
        proxies = from_environment(environ)
    assert proxies.https is not None
    assert SECRET not in repr(proxies)
    assert SECRET not in repr(proxies.proxy_for("https://example.com/"))
    assert SECRET not in caplog.text
    assert "HTTP_PROXY is not a proxy URL" in caplog.text
    for bad in (f"http://user:{SECRET}@proxy:port", f"//user:{SECRET}@"):
        with pytest.raises(ValueError, match=r"URL|port") as raised:
            parse_proxy(bad)
        assert SECRET not in str(raised.value)


def test_proxies_are_immutable() -> None:
    proxies = Proxies(https=Proxy("http://proxy"), no_proxy="10.0.0.0/8")
    with pytest.raises(AttributeError):
        proxies.no_proxy = ""  # type: ignore[misc]


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()
