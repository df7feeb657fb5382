"""The ICE candidates of a caller's offer, screened before aiortc sees them.

aiortc parses every ``a=candidate`` line of an offer on the event loop and then aims
connectivity checks at each address: an offer of 20,000 candidates (under the body limit)
held the loop for half a minute, and aimed the server's packets wherever the caller liked.
So an offer carries at most ``VISIONSTREAM_MAX_REMOTE_CANDIDATES`` candidates (more is a 400),
and each candidate's address is checked as a peer's: inside ``VISIONSTREAM_PEER_NETWORKS``
(default anywhere), never loopback, link-local, unspecified or multicast unless a listed
network holds it. Peers are not cameras: an operator who lists only the camera network in
``VISIONSTREAM_ALLOWED_NETWORKS`` still serves viewers from anywhere. Refused candidates are
left out of the offer. A caller on this machine may offer its loopback address (it is that
caller's own), and a candidate named by host name (a browser's mDNS ``.local``) is kept: it
resolves only on the caller's own link.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass

from ..config import Settings
from ..egress import EgressPolicy
from ..errors import InvalidOffer

__all__ = ["CandidateScreen"]

log = logging.getLogger(__name__)

_CANDIDATE = "a=candidate:"
# a=candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> ...
_ADDRESS_FIELD = 4


@dataclass(frozen=True)
class CandidateScreen:
    """How many remote candidates an offer may carry, and which addresses they may have."""

    egress: EgressPolicy
    limit: int

    @classmethod
    def of(cls, settings: Settings) -> CandidateScreen:
        peers = EgressPolicy(settings.peer_networks, setting="VISIONSTREAM_PEER_NETWORKS")
        return cls(peers, settings.max_remote_candidates)

    def screen(self, sdp: str, caller: str, named: str) -> str:
        """``sdp`` with the candidates it may not have left out; ``InvalidOffer`` (400) when
        it has too many, or had some and every one was refused (saying why)."""
        lines = sdp.splitlines(keepends=True)
        count = sum(line.startswith(_CANDIDATE) for line in lines)
        if count > self.limit:
            raise InvalidOffer(
                f"{named} has {count} ICE candidates; at most {self.limit} are accepted "
                "(VISIONSTREAM_MAX_REMOTE_CANDIDATES)"
            )
        if not count:
            return sdp
        local_caller = _is_loopback(caller)
        kept: list[str] = []
        refused: list[str] = []
        for line in lines:
            reason = self._refusal(line, local_caller) if line.startswith(_CANDIDATE) else None
            if reason is None:
                kept.append(line)
            else:
                refused.append(reason)
        if len(refused) == count:
            raise InvalidOffer(f"every ICE candidate of {named} is refused: {refused[0]}")
        if refused:
            log.info(
                "left %d of %d ICE candidates out of an offer: %s", len(refused), count, refused[0]
            )
        return "".join(kept)

    def _refusal(self, line: str, local_caller: bool) -> str | None:
        fields = line.split()
        if len(fields) <= _ADDRESS_FIELD:
            return None  # malformed: aiortc's parser says so
        try:
            address = ipaddress.ip_address(fields[_ADDRESS_FIELD].strip("[]"))
        except ValueError:
            return None  # a host name (mDNS): resolvable only on the caller's link
        if local_caller and address.is_loopback:
            return None
        reason = self.egress.refusal(address)
        return f"{address} is {reason}" if reason is not None else None


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
