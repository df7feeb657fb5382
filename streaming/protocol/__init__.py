"""Wire formats shared by the server and clients (see shared/reference/webrtc-protocol.md)."""
