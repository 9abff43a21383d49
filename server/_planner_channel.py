"""The env server's channels to its planner services: one address or several replicas, balanced."""

from __future__ import annotations

import ipaddress
import json

import grpc

from rtplan import wire

#: gRPC name-resolver schemes a planner address may name explicitly.
_SCHEMES = ("dns:", "ipv4:", "ipv6:")

#: The channel's service config (gRPC's service-config JSON, proposals A2 and A6):
#: - round_robin keeps a connection to every address the target resolves to and sends each
#:   call to the next ready one (the default, pick_first, would pin every call to one replica);
#:   a replica whose connection drops is skipped until it is back;
#: - a Plan, ListGames, Health or Version call that ends UNAVAILABLE before any answer came
#:   back (a replica that died under it or is still compiling) is tried again, on the next
#:   replica. All four are safe to repeat: the service keeps no state between calls. The tries
#:   share the call's own deadline, so a retried Plan still lands by its frame or counts as a
#:   miss. There is no retryThrottling: with grpcio 1.85 its tokens ran out after five failed
#:   attempts and stayed out while later calls succeeded, which turned retries off for good;
#:   with every replica down a call costs three attempts that each fail at once.
SERVICE_CONFIG = {
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [
        {
            "name": [{"service": "rtplan.v1.Planner"}],
            "retryPolicy": {
                "maxAttempts": 3,
                "initialBackoff": "0.01s",
                "maxBackoff": "0.1s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ],
}

#: A planner channel retries a lost connection quickly (gRPC's default backoff grows to 2 min),
#: pings every connection so that a replica that hangs is dropped like one that died
#: (`wire.KEEPALIVE_TIME_MS`; without data between pings too: gRPC stops at 2 by default), and
#: uses our service config, never one a DNS record might carry.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", wire.MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", wire.MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", wire.KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", wire.KEEPALIVE_TIMEOUT_MS),
    # What gRPC core enforces in fact (its own default is a minute; the keepalive timeout
    # above is not acted on by this release, grpc/grpc#39239).
    ("grpc.http2.ping_timeout_ms", wire.KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps(SERVICE_CONFIG)),
    ("grpc.service_config_disable_resolution", 1),
]

_FORMS = (
    "HOST:PORT, a comma-separated list of IP:PORT (one per replica), or dns:///NAME:PORT "
    "(a name that resolves to every replica)"
)


#: What separates planner services (each its own game set) in a planner address setting.
SERVICE_SEPARATOR = ";"


def planner_services(address: str) -> tuple[str, ...]:
    """The planner services of a planner address setting: `;`-separated, each in one of the
    forms `planner_target` takes (one service, or replicas of one service). Calls go to the
    service that serves their game (`server._planner_route.PlannerRouter`); within one, they
    are balanced over its replicas.

    Raises:
        ValueError: one sentence naming the entry that is wrong and how.
    """
    services = [s.strip() for s in address.split(SERVICE_SEPARATOR)]
    if len(services) > 1 and not all(services):
        raise ValueError(
            f"the planner address {address!r} has an empty service between its "
            f"{SERVICE_SEPARATOR!r} (a stray separator?)"
        )
    for service in services:
        planner_target(service)
    if len(set(services)) < len(services):
        raise ValueError(f"the planner address {address!r} names a service twice")
    return tuple(services)


def planner_target(address: str) -> str:
    """The gRPC target of a planner address setting.

    Accepted forms: `HOST:PORT` (one service, or a host name whose DNS answer lists several
    replicas: all of them are used); `IP:PORT,IP:PORT,...` (replicas by IP address, IPv6 in
    brackets: `[::1]:50051`), which becomes gRPC's `ipv4:` or `ipv6:` target; and the gRPC
    targets `dns:///NAME:PORT` (e.g. a Kubernetes headless Service), `ipv4:IP:PORT,...` and
    `ipv6:[IP]:PORT,...`, kept as given.

    Raises:
        ValueError: one sentence naming the entry that is wrong and how.
    """
    address = address.strip()
    if not address:
        raise ValueError(f"the planner address is empty; give {_FORMS}")
    scheme = next((s for s in _SCHEMES if address.startswith(s)), None)
    if scheme == "dns:":
        rest = address[len(scheme) :]
        if rest.startswith("//"):  # dns://[authority]/NAME:PORT
            _, slash, rest = rest[2:].partition("/")
            if not slash:
                raise ValueError(
                    f"{address!r} has no NAME:PORT after dns://; write dns:///NAME:PORT"
                )
        if "," in rest:
            raise ValueError(
                f"{address!r}: a dns: target names one host; list replicas by IP without it"
            )
        _host_port(rest, address)
        return address
    if scheme is not None:
        entries = _entries(address[len(scheme) :], address)
        for entry in entries:
            host = _host_port(entry, address)
            if _ip_version(host) != int(scheme[3]):
                raise ValueError(f"{entry!r} in {address!r} is not an {scheme[:-1]} address")
        return address
    entries = _entries(address, address)
    if len(entries) == 1:
        _host_port(entries[0], address)
        return entries[0]
    versions = set()
    for entry in entries:
        host = _host_port(entry, address)
        version = _ip_version(host)
        if version is None:
            raise ValueError(
                f"{entry!r} in {address!r} is a host name: a list of replicas takes IP "
                "addresses (gRPC resolves no names in it); for names, give one name that "
                "resolves to every replica, dns:///NAME:PORT"
            )
        versions.add(version)
    if len(versions) > 1:
        raise ValueError(f"{address!r} mixes IPv4 and IPv6 addresses; list one kind")
    return f"ipv{versions.pop()}:" + ",".join(entries)


def _entries(listing: str, address: str) -> list[str]:
    entries = [e.strip() for e in listing.split(",")]
    for i, entry in enumerate(entries, 1):
        if not entry:
            raise ValueError(
                f"entry {i} of {len(entries)} in the planner address {address!r} is empty "
                "(a stray comma?)"
            )
    return entries


def _host_port(entry: str, address: str) -> str:
    """The host of `HOST:PORT` or `[IPv6]:PORT`, checked."""
    where = f"{entry!r}" if entry == address else f"{entry!r} in {address!r}"
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ValueError(f"{where} is not [IPV6]:PORT")
        port = rest[1:]
        if _ip_version(host) != 6:
            raise ValueError(f"{where}: {host!r} in brackets is not an IPv6 address")
    else:
        host, colon, port = entry.rpartition(":")
        if not colon:
            raise ValueError(f"{where} has no port; write HOST:PORT")
        if ":" in host:
            raise ValueError(f"{where}: an IPv6 address needs brackets, [ADDRESS]:PORT")
        if not host or any(c.isspace() or c in "/@" for c in host):
            raise ValueError(f"{where} has no valid host before the port")
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise ValueError(f"{where}: the port {port!r} is not a number from 1 to 65535")
    return host


def _ip_version(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def open_channel(address: str) -> grpc.aio.Channel:
    """An aio channel to the planner service at `address` (see `planner_target`), balancing
    its calls over every replica the address names or resolves to."""
    return grpc.aio.insecure_channel(planner_target(address), options=CHANNEL_OPTIONS)
