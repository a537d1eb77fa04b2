"""`python -m pyccm.manager.certificate BIND_ADDRESS`: the manager's self-signed serving
certificate, made in a short-lived child process.

Making a certificate needs cryptography, which would stay in the long-lived manager for good
(about 7 MiB of its memory, docs/architecture.md#lean-imports) for one use at start. So the
manager runs this module (`serving.self_signed`), which prints the certificate and then its
key, PEM, on stdout, and exits. Upstream's alternate names: localhost, 127.0.0.1, the host's
name and the bind address; one year.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509

LIFETIME = datetime.timedelta(days=365)


def alternative_names(bind_address: str) -> list[x509.GeneralName]:
    from cryptography import x509

    names: list[x509.GeneralName] = []
    hostname = socket.gethostname()
    if hostname and hostname != "localhost":
        names.append(x509.DNSName(hostname))
    try:
        address = ipaddress.ip_address(bind_address)
    except ValueError:
        return names
    if not address.is_unspecified:
        names.append(x509.IPAddress(address))
    return names


def main(argv: list[str]) -> int:
    from pyccm import selfsigned

    [bind_address] = argv
    now = datetime.datetime.now(datetime.UTC)
    cert, key = selfsigned.self_signed(
        f"localhost@{int(now.timestamp())}", alternative_names(bind_address), lifetime=LIFETIME
    )
    sys.stdout.buffer.write(cert + key)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
