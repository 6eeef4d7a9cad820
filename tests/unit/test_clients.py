"""Who a client is (torchatlas/clients.py): the TCP peer, ``X-Forwarded-For`` only from a
trusted proxy, IPv6 by /64; a visitor can neither multiply nor choose it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from torchatlas.clients import TrustedProxies, Visitor, bad_entries, client_key, client_of

NGINX = TrustedProxies.parse("127.0.0.1, ::1")


def test_loopback_is_a_client_not_unknown() -> None:
    assert client_of("127.0.0.1") == "ip:127.0.0.1"
    assert client_of("::1") == "ip:127.0.0.1"  # the same machine
    assert client_of("::ffff:127.0.0.1") == "ip:127.0.0.1"  # a dual-stack bind's IPv4 peer


def test_each_loopback_address_is_its_own_client() -> None:
    assert client_of("127.0.0.2") != client_of("127.0.0.3")


def test_ipv6_counts_by_its_slash_64() -> None:
    one = client_of("2001:db8:aa:bb:1:2:3:4")
    assert one == client_of("2001:db8:aa:bb:ffff::9") == "ip:2001:db8:aa:bb::/64"
    assert one != client_of("2001:db8:aa:bc::1")


def test_forwarded_for_is_the_visitors_word_without_a_trusted_proxy() -> None:
    for header in ("6.6.6.6", "6.6.6.6, 7.7.7.7", "garbage", ""):
        assert client_of("127.0.0.1", [header]) == "ip:127.0.0.1"
        assert client_of("203.0.113.9", [header], NGINX) == "ip:203.0.113.9"


def test_a_trusted_proxy_names_the_client_right_to_left() -> None:
    # nginx appends the peer it saw; whatever the visitor prepended is left of it.
    assert client_of("127.0.0.1", ["1.1.1.1, 198.51.100.7"], NGINX) == "ip:198.51.100.7"
    # Two proxies of ours in a row are skipped.
    chain = TrustedProxies.parse("127.0.0.1, 10.0.0.0/8")
    assert client_of("127.0.0.1", ["1.1.1.1, 198.51.100.7, 10.1.2.3"], chain) == ("ip:198.51.100.7")
    # Several header lines are one list, in order.
    assert client_of("127.0.0.1", ["1.1.1.1", "198.51.100.8"], NGINX) == "ip:198.51.100.8"


def test_an_unreadable_header_from_a_proxy_counts_the_proxy() -> None:
    for header in ("not-an-address", "1.1.1.1, ", "x" * 5000, ",".join(["1.1.1.1"] * 500)):
        found = client_of("127.0.0.1", [header], NGINX)
        assert found in ("ip:127.0.0.1", "ip:1.1.1.1"), found
    assert client_of("127.0.0.1", ["not-an-address"], NGINX) == "ip:127.0.0.1"
    assert client_of("127.0.0.1", ["x" * 5000], NGINX) == "ip:127.0.0.1"


def test_ports_brackets_and_zones_are_tolerated() -> None:
    assert client_of("127.0.0.1", ["198.51.100.7:5555"], NGINX) == "ip:198.51.100.7"
    assert client_of("127.0.0.1", ["[2001:db8::1]:443"], NGINX) == "ip:2001:db8::/64"
    assert client_of("fe80::1%eth0") == "ip:fe80::/64"


def test_no_peer_is_no_client_and_a_session_alone_is_its_own() -> None:
    assert client_of(None) is None
    assert client_of("") is None
    assert client_of("not an ip") is None
    assert Visitor.alone("abc") == Visitor("session:abc", "abc")


def test_the_setting_ignores_what_is_not_an_address_and_says_so() -> None:
    proxies = TrustedProxies.parse("10.0.0.0/8, nonsense, ::1")
    assert len(proxies.networks) == 2
    assert bad_entries("10.0.0.0/8, nonsense, ::1") == ["nonsense"]
    assert TrustedProxies.parse(None).networks == ()


@given(st.ip_addresses(), st.text(max_size=80))
def test_without_trusted_proxies_the_peer_alone_decides(peer, header) -> None:
    assert client_of(str(peer), [header]) == client_of(str(peer))


@given(st.ip_addresses(v=4), st.lists(st.ip_addresses(), max_size=6))
def test_behind_a_trusted_proxy_the_client_is_never_a_proxy_unless_all_are(peer, hops) -> None:
    proxies = TrustedProxies.parse(f"{peer}")
    header = ", ".join(str(hop) for hop in hops)
    found = client_of(str(peer), [header], proxies)
    plain = [getattr(hop, "ipv4_mapped", None) or hop for hop in hops]  # as the header reads
    untrusted = [hop for hop in plain if hop != peer]
    if untrusted:
        assert found == client_key(untrusted[-1])
    else:
        assert found == client_key(peer)
