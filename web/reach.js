// Why this page's video connection to the server did not come up, from the addresses each side
// offered: the same words as the Python client's (streaming/rtc/reach.py), with what to set.

const TURN_HINT =
  "A TURN server relays it: set one under “Network” (and the server's VISIONSTREAM_ICE_SERVERS).";

/** The candidate addresses an SDP offers, without repeats. */
export function offeredAddresses(sdp) {
  const found = [];
  for (const line of (sdp ?? "").split(/\r?\n/)) {
    if (!line.startsWith("a=candidate:")) continue;
    const address = line.split(" ")[4];
    if (address && !found.includes(address)) found.push(address);
  }
  return found;
}

/** true / false for an IP address, null for a name (it may resolve to either). */
function isLoopback(address) {
  const bare = address.replace(/^\[|\]$/g, "");
  if (bare === "localhost" || bare === "::1") return true;
  if (/^\d+\.\d+\.\d+\.\d+$/.test(bare)) return bare.startsWith("127.");
  if (bare.includes(":")) return false; // another IPv6 address
  return null;
}

/**
 * Why the connection cannot come up, seen before it is tried; null when it may.
 * @param {string} localSdp @param {string} remoteSdp @param {string} pageHost location.hostname
 */
export function hopeless(localSdp, remoteSdp, pageHost) {
  const remote = offeredAddresses(remoteSdp);
  if (!remote.length) {
    return (
      "The video connection cannot be made: the server offered no address for its media (its " +
      "machine has no network address but loopback, which ICE never offers on its own). Set the " +
      "server's VISIONSTREAM_ICE_HOST_ADDRESSES (127.0.0.1 to use it from that machine)."
    );
  }
  if (remote.every((a) => isLoopback(a) === true) && isLoopback(pageHost) === false) {
    return (
      `The video connection cannot be made: the server offered only ${remote.join(", ")}, which ` +
      "only its own machine reaches. Set the server's VISIONSTREAM_ICE_HOST_ADDRESSES to an " +
      `address of it this browser reaches (${pageHost}, say).`
    );
  }
  // This browser's own description may list no address (Chromium keeps its host addresses
  // to itself without camera permission) and still connect: the server learns it from the
  // browser's checks. Nothing to conclude from it.
  return null;
}

/** Why a connection that was tried did not come up. */
export function connectionProblem(localSdp, remoteSdp, pageHost, seconds) {
  const early = hopeless(localSdp, remoteSdp, pageHost);
  if (early) return early;
  const remote = offeredAddresses(remoteSdp).join(", ");
  const within = seconds ? ` within ${seconds} s` : "";
  return (
    `The video connection failed${within}: no pair of the addresses offered connected (the ` +
    `server's: ${remote}). A firewall or NAT between this browser and the server blocks UDP. ` +
    TURN_HINT
  );
}
