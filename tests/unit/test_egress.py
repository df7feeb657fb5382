"""Where callers may make the server connect: the policy alone (no connection is made)."""

from __future__ import annotations

import ipaddress

import pytest

from streaming.egress import EgressPolicy, EgressRefused, ice_server_host
from streaming.errors import InvalidRequest

DEFAULT = EgressPolicy(["0.0.0.0/0", "::/0"])
LOOPBACK_TOO = EgressPolicy(["0.0.0.0/0", "::/0", "127.0.0.0/8"])
LAN_ONLY = EgressPolicy(["192.168.0.0/16", "10.0.0.0/8"])


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("239.1.2.3", "multicast"),
    ],
)
def test_the_server_itself_and_cloud_metadata_are_refused_by_default(address, why):
    reason = DEFAULT.refusal(ipaddress.ip_address(address))
    assert reason is not None and why in reason and "VISIONSTREAM_ALLOWED_NETWORKS" in reason


@pytest.mark.parametrize(
    "address", ["192.168.1.20", "10.0.0.7", "172.16.3.4", "fd00::5", "8.8.8.8"]
)
def test_lan_cameras_and_public_hosts_are_allowed_by_default(address):
    assert DEFAULT.refusal(ipaddress.ip_address(address)) is None


def test_a_listed_network_inside_a_refused_range_allows_it():
    assert LOOPBACK_TOO.refusal(ipaddress.ip_address("127.0.0.1")) is None
    assert LOOPBACK_TOO.refusal(ipaddress.ip_address("169.254.169.254")) is not None


def test_a_narrower_list_refuses_the_rest():
    assert LAN_ONLY.refusal(ipaddress.ip_address("192.168.4.4")) is None
    reason = LAN_ONLY.refusal(ipaddress.ip_address("8.8.8.8"))
    assert reason is not None and "not in VISIONSTREAM_ALLOWED_NETWORKS" in reason


async def test_urls_are_checked_by_host_with_credentials_masked():
    with pytest.raises(EgressRefused, match=r"rtsp://\*\*\*@127.0.0.1/live.*loopback") as e:
        await DEFAULT.check_url("rtsp://admin:hunter2@127.0.0.1/live", "rtsp_url")
    assert "hunter2" not in str(e.value) and "admin" not in str(e.value)
    with pytest.raises(EgressRefused, match="loopback"):
        await DEFAULT.check_url("http://localhost:8080/hook", "webhook url")  # resolved
    with pytest.raises(EgressRefused, match="loopback"):
        await DEFAULT.check_url("http://[::1]:8080/x", "mjpeg_url")
    await DEFAULT.check_url("rtsp://192.168.1.20:554/live", "rtsp_url")  # no connection made
    with pytest.raises(InvalidRequest, match="cannot resolve"):
        await DEFAULT.check_url("rtsp://no-such-host.invalid/live", "rtsp_url")


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("stun:stun.example.org:19302", "stun.example.org", 19302),
        ("turn:10.0.0.1?transport=udp", "10.0.0.1", None),
        ("turns:[2001:db8::1]:5349", "2001:db8::1", 5349),
    ],
)
def test_ice_server_urls_give_their_host(url, host, port):
    assert ice_server_host(url) == (host, port)


@pytest.mark.parametrize("url", ["http://x", "stun:", "turn:host:port"])
def test_odd_ice_server_urls_are_refused_clearly(url):
    with pytest.raises(InvalidRequest, match="ICE server"):
        ice_server_host(url)
