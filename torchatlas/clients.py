"""Who is asking: one client per person's machine, and the browser sessions within it.

A browser session costs nothing (every websocket connection is a new one), so no limit that
must bind a person may count sessions alone. Every limit of the app (sandbox queue share,
joins, class starts, code probes, upload bytes) keys on a :class:`Visitor`: the **client**
(the machine's address, which a visitor cannot multiply or choose) and, within it, the
**session** (fairness between the tabs and phones that share one address).

The client is the TCP peer's address, normalised (:func:`client_of`):

- IPv4 as written; an IPv4-mapped IPv6 peer (``::ffff:127.0.0.1`` on a dual-stack bind) as
  its IPv4 address; loopback is a client like any other (never "unknown"), and ``::1`` is the
  same client as ``127.0.0.1`` (one machine);
- IPv6 by its /64 prefix: one home or phone gets a whole /64 and may pick any address in it;
- ``X-Forwarded-For`` is read **only** when the peer is a configured trusted proxy
  (:class:`TrustedProxies`, the ``ATLAS_TRUSTED_PROXIES`` setting: addresses and networks,
  comma separated; empty by default). The client is then the right-most address in the header
  that is not itself a trusted proxy: a visitor can prepend anything, but the entries a
  trusted proxy appended are the proxy's own word. A header that cannot be read (too long,
  not addresses) counts the proxy itself, so a broken proxy shares one budget rather than
  letting each request choose one.

Without a peer (a script run outside a browser: AppTest, a notebook) the client is the
session's own ``session:<id>``.

Plain Python, no Streamlit: the page reads the peer and the header, this module decides.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass

TRUSTED_PROXIES_SETTING = "ATLAS_TRUSTED_PROXIES"
IPV6_PREFIX = 64  # one subscriber's share of IPv6 (RFC 6177): a client, not one address
MAX_FORWARDED_CHARS = 1024  # a header longer than this is not a proxy chain we read
MAX_FORWARDED_HOPS = 16
MAX_SETTING_ENTRIES = 64

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Visitor:
    """One browser session of one client: ``client`` is what every per-person limit counts,
    ``session`` what shares that client's budget fairly between its tabs."""

    client: str
    session: str

    @classmethod
    def alone(cls, session: str) -> Visitor:
        """A session that is its own client (no peer address known)."""
        return cls(f"session:{session}", session)


def _address(text: object) -> Address | None:
    """An IP address from text (ports, brackets and IPv6 zone ids tolerated), else None."""
    if not isinstance(text, str) or not 0 < len(text) <= 64:
        return None
    text = text.strip()
    if text.startswith("["):  # [v6]:port
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # v4:port
        text = text.partition(":")[0]
    text = text.partition("%")[0]
    try:
        found = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def client_key(address: Address) -> str:
    """The client an address belongs to, as text: ``ip:203.0.113.7``, ``ip:2001:db8::/64``."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_loopback:
            return "ip:127.0.0.1"  # ::1 and 127.0.0.1 are the same machine
        prefix = ipaddress.ip_network(f"{address}/{IPV6_PREFIX}", strict=False)
        return f"ip:{prefix}"
    return f"ip:{address}"


@dataclass(frozen=True)
class TrustedProxies:
    """The proxies whose ``X-Forwarded-For`` is believed (none by default)."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> TrustedProxies:
        """``"127.0.0.1, 10.0.0.0/8, ::1"`` → the proxies; entries that are not addresses or
        networks are ignored (the server log should say so: :func:`bad_entries`)."""
        found: list[Network] = []
        for entry in _entries(text):
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                continue
            found.append(network)
        return cls(tuple(found))

    @classmethod
    def from_environment(cls) -> TrustedProxies:
        return cls.parse(os.environ.get(TRUSTED_PROXIES_SETTING))

    def trusts(self, address: Address) -> bool:
        return any(address.version == net.version and address in net for net in self.networks)


def _entries(text: str | None) -> list[str]:
    if not text:
        return []
    return [part.strip() for part in text.split(",")[:MAX_SETTING_ENTRIES] if part.strip()]


def bad_entries(text: str | None) -> list[str]:
    """The entries of a trusted-proxies setting that are neither addresses nor networks."""
    bad = []
    for entry in _entries(text):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            bad.append(entry[:60])
    return bad


def _forwarded_client(header: str, proxies: TrustedProxies) -> Address | None:
    """The right-most address of ``X-Forwarded-For`` that is not a trusted proxy; None when
    the header cannot be read as a chain of addresses."""
    if len(header) > MAX_FORWARDED_CHARS:
        return None
    hops = [hop.strip() for hop in header.split(",")]
    if len(hops) > MAX_FORWARDED_HOPS:
        hops = hops[-MAX_FORWARDED_HOPS:]
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            return None
        if not proxies.trusts(address):
            return address
    return None


def client_of(
    peer: str | None,
    forwarded_for: Iterable[str] = (),
    proxies: TrustedProxies = TrustedProxies(),
) -> str | None:
    """The client behind a connection from ``peer`` carrying the ``X-Forwarded-For`` header
    values ``forwarded_for`` (in the order received); None when there is no peer to count.

    >>> client_of("::ffff:127.0.0.1")
    'ip:127.0.0.1'
    >>> client_of("127.0.0.1", ["6.6.6.6"])  # no trusted proxy: the header is the visitor's
    'ip:127.0.0.1'
    >>> client_of("10.0.0.2", ["6.6.6.6, 198.51.100.4"], TrustedProxies.parse("10.0.0.2"))
    'ip:198.51.100.4'
    """
    address = _address(peer)
    if address is None:
        return None
    if proxies.trusts(address):
        # Several headers are one list, joined in order (RFC 9110 field lines).
        header = ",".join(value for value in forwarded_for if isinstance(value, str))
        behind = _forwarded_client(header, proxies) if header.strip() else None
        if behind is not None:
            address = behind
    return client_key(address)
