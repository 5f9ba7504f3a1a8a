"""The SSRF guard's rules: which hosts and addresses WebFetch refuses.

Everything here is a plain function of its arguments (no DNS, no sockets):
:func:`address_refusal` says why an IP address must not be connected to,
:func:`host_refusal` why a host name must not even be resolved, and
:class:`HostRules` matches the user's allow and deny lists. The fetch tool
asks them twice for every hop: once before the request (a clear, early
refusal) and again inside its network backend, on the very addresses the
socket is about to connect to (see ``_web_net``), which is what closes the
DNS-rebinding window.

The address rules block every special-purpose range of the IANA IPv4 and
IPv6 special-purpose registries (RFC 6890 and successors) that is not
globally reachable, and look inside the IPv6 forms that embed an IPv4
address (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4,
Teredo), so ``[::ffff:127.0.0.1]`` is a loopback address like ``127.0.0.1``.
Whatever the explicit tables miss, the final rule catches: an IPv4 address
must be ``is_global`` and an IPv6 address must be global unicast
(``2000::/3``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Final, TypeAlias

import attrs

from helikon.errors import ConfigError

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4: Final = ipaddress.IPv4Network
_V6: Final = ipaddress.IPv6Network

#: IPv4 ranges that are never fetched, with the reason shown to the model.
_IPV4_BLOCKED: Final[tuple[tuple[ipaddress.IPv4Network, str], ...]] = (
    (_V4("0.0.0.0/8"), "unspecified ('this network') address"),
    (_V4("10.0.0.0/8"), "private address"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT (shared) address"),
    (_V4("127.0.0.0/8"), "loopback address"),
    (_V4("169.254.169.254/32"), "link-local cloud metadata address"),
    (_V4("169.254.0.0/16"), "link-local address"),
    (_V4("172.16.0.0/12"), "private address"),
    (_V4("192.0.0.0/24"), "IETF protocol assignment address"),
    (_V4("192.0.2.0/24"), "documentation address"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast address"),
    (_V4("192.168.0.0/16"), "private address"),
    (_V4("198.18.0.0/15"), "benchmarking address"),
    (_V4("198.51.100.0/24"), "documentation address"),
    (_V4("203.0.113.0/24"), "documentation address"),
    (_V4("224.0.0.0/4"), "multicast address"),
    (_V4("255.255.255.255/32"), "broadcast address"),
    (_V4("240.0.0.0/4"), "reserved address"),
)

#: IPv6 ranges that carry an IPv4 address, and how to get it out.
_NAT64: Final = _V6("64:ff9b::/96")
_MAPPED: Final = _V6("::ffff:0:0/96")
_TRANSLATED: Final = _V6("::ffff:0:0:0/96")
_COMPATIBLE: Final = _V6("::/96")
_SIX_TO_FOUR: Final = _V6("2002::/16")
_TEREDO: Final = _V6("2001::/32")
#: Embedding forms whose traffic reaches the embedded IPv4 address; the
#: others (IPv4-compatible, deprecated; Teredo, a tunnel) go on to the tables below.
_ROUTED_EMBEDDINGS: Final = frozenset({"IPv4-mapped", "IPv4-translated", "NAT64", "6to4"})

#: IPv6 ranges that are never fetched (checked after the embedding forms).
_IPV6_BLOCKED: Final[tuple[tuple[ipaddress.IPv6Network, str], ...]] = (
    (_V6("::/128"), "unspecified address"),
    (_V6("::1/128"), "loopback address"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64 address"),
    (_V6("100::/64"), "discard-only address"),
    (_V6("2001::/23"), "IETF protocol assignment address"),
    (_V6("2001:db8::/32"), "documentation address"),
    (_V6("3fff::/20"), "documentation address"),
    (_V6("fc00::/7"), "unique local (ULA) address"),
    (_V6("fe80::/10"), "link-local address"),
    (_V6("fec0::/10"), "site-local address"),
    (_V6("ff00::/8"), "multicast address"),
)
_GLOBAL_UNICAST: Final = _V6("2000::/3")

#: Names that mean "this machine" or "this network" whatever DNS says.
_LOCAL_NAMES: Final = frozenset(
    {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "broadcasthost"}
)
#: Special-use and private-use suffixes (RFC 6761, RFC 6762, RFC 8375, ICANN's ``.internal``).
_LOCAL_SUFFIXES: Final = (".localhost", ".local", ".localdomain", ".internal", ".home.arpa")
_NUMERIC_HOST: Final = re.compile(r"[0-9a-fx.]+")


def address_refusal(address: IPAddress) -> str | None:
    """Why connecting to ``address`` is refused, or None when it is a public address.

    >>> address_refusal(ipaddress.ip_address("93.184.216.34")) is None
    True
    >>> address_refusal(ipaddress.ip_address("127.0.0.1"))
    'loopback address 127.0.0.1'
    >>> address_refusal(ipaddress.ip_address("169.254.169.254"))
    'link-local cloud metadata address 169.254.169.254'
    >>> address_refusal(ipaddress.ip_address("::ffff:10.0.0.1"))
    'IPv4-mapped private address 10.0.0.1 (::ffff:a00:1)'
    >>> address_refusal(ipaddress.ip_address("fd00::1"))
    'unique local (ULA) address fd00::1'
    """
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_refusal(address)
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        kind, inner = embedded
        reason = _ipv4_refusal(inner)
        if reason is not None:
            return f"{kind} {reason} ({address.compressed})"
        if kind in _ROUTED_EMBEDDINGS:  # the public IPv4 address is what a connection reaches
            return None
    bare = ipaddress.IPv6Address(address.packed)  # drop a %zone: it changes nothing about the range
    for network, reason in _IPV6_BLOCKED:
        if bare in network:
            return f"{reason} {address.compressed}"
    if bare not in _GLOBAL_UNICAST:
        return f"reserved address {address.compressed}"
    return None


def host_refusal(host: str) -> str | None:
    """Why ``host`` (a URL's host, IDNA-encoded and lower case) is refused before any lookup, or None.

    IP literals are judged by :func:`address_refusal`, including the
    shorthand forms ``inet_aton`` accepts (``127.1``, ``0x7f.1``,
    ``2130706433``), which a resolver would turn into the same address.

    >>> host_refusal("example.com") is None
    True
    >>> host_refusal("LOCALHOST.")
    "host name 'localhost' always means this machine"
    >>> host_refusal("printer.local")
    "host name 'printer.local' is in the special-use domain .local"
    >>> host_refusal("0x7f.1")
    'loopback address 127.0.0.1'
    >>> host_refusal("intranet")
    "single-label host name 'intranet' would resolve through local search domains"
    """
    name = host.lower().rstrip(".")
    address = literal_address(name)
    if address is not None:
        return address_refusal(address)
    if not name:
        return "empty host name"
    if name in _LOCAL_NAMES:
        return f"host name {name!r} always means this machine"
    for suffix in _LOCAL_SUFFIXES:
        if name.endswith(suffix):
            return f"host name {name!r} is in the special-use domain {suffix}"
    if "." not in name:
        return f"single-label host name {name!r} would resolve through local search domains"
    if not all(part and len(part) <= 63 for part in name.split(".")) or ":" in name or "%" in name:
        return f"invalid host name {name!r}"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` denotes by itself, without DNS, or None for a name.

    >>> literal_address("::1")
    IPv6Address('::1')
    >>> literal_address("2130706433")
    IPv4Address('127.0.0.1')
    >>> literal_address("cafe.example") is None
    True
    """
    text = host.strip("[]")
    if ":" in text and "%25" in text:  # an IPv6 zone the URL parser kept percent-encoded (``%25eth0``)
        text = text.replace("%25", "%", 1)
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(text.lower()):
        try:  # the classic BSD forms: 127.1, 0177.0.0.1, 0x7f000001, 2130706433
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def _ipv4_refusal(address: ipaddress.IPv4Address) -> str | None:
    for network, reason in _IPV4_BLOCKED:
        if address in network:
            return f"{reason} {address}"
    if not address.is_global:
        return f"non-public address {address}"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address inside an IPv6 address that carries one, with the form's name."""
    bare = ipaddress.IPv6Address(address.packed)
    low32 = ipaddress.IPv4Address(bare.packed[-4:])
    if bare in _MAPPED:
        return "IPv4-mapped", low32
    if bare in _TRANSLATED:
        return "IPv4-translated", low32
    if bare in _NAT64:
        return "NAT64", low32
    if bare in _COMPATIBLE and int(bare) > 1:  # :: and ::1 are the unspecified and loopback addresses
        return "IPv4-compatible", low32
    if bare in _SIX_TO_FOUR:
        return "6to4", ipaddress.IPv4Address(bare.packed[2:6])
    if bare in _TEREDO:
        return "Teredo", ipaddress.IPv4Address(int(low32) ^ 0xFFFFFFFF)  # the client address, obfuscated
    return None


@attrs.frozen
class HostRule:
    """One allow/deny list entry: ``example.com`` matches it and its
    subdomains, ``*.example.com`` only the subdomains, an IP literal itself."""

    name: str
    subdomains_only: bool = False
    address: bool = False

    def matches(self, host: str) -> bool:
        if self.address:
            return host == self.name
        if host == self.name:
            return not self.subdomains_only
        return host.endswith("." + self.name)


def host_rule(entry: str) -> HostRule:
    """Parse one allow/deny list entry.

    >>> host_rule("*.Example.COM.")
    HostRule(name='example.com', subdomains_only=True, address=False)
    >>> host_rule("[::1]")
    HostRule(name='::1', subdomains_only=False, address=True)

    Raises:
        ConfigError: the entry is empty or not a host name (a URL, a path, a port).
    """
    text = entry.strip().lower().rstrip(".")
    wildcard = text.startswith("*.")
    if wildcard:
        text = text[2:]
    address = literal_address(text) if not wildcard else None
    if address is not None:
        return HostRule(str(ipaddress.ip_address(address.packed)), address=True)
    if not text or any(c in text for c in "/:@?#* "):
        raise ConfigError(f"invalid host {entry!r} in a host list: give a host name like 'example.com'")
    try:
        name = text.encode("idna").decode("ascii")
    except UnicodeError:
        raise ConfigError(f"invalid host {entry!r} in a host list: not a valid domain name") from None
    return HostRule(name, subdomains_only=wildcard)


def host_rules(entries: Iterable[str] | str | None) -> tuple[HostRule, ...] | None:
    """A host list as rules; a single string is one entry, None stays None."""
    if entries is None:
        return None
    if isinstance(entries, str):
        entries = (entries,)
    return tuple(host_rule(entry) for entry in entries)


def normalized_host(host: str) -> str:
    """A URL's host as host lists see it: lower case, no trailing dot, IP literals canonical.

    >>> normalized_host("Example.com.")
    'example.com'
    >>> normalized_host("::FFFF:7f00:1")
    '::ffff:7f00:1'
    """
    name = host.lower().rstrip(".")
    address = literal_address(name)
    return name if address is None else str(ipaddress.ip_address(address.packed))


__all__ = [
    "HostRule",
    "IPAddress",
    "address_refusal",
    "host_refusal",
    "host_rule",
    "host_rules",
    "literal_address",
    "normalized_host",
]
