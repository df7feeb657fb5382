"""Server-side WebRTC: one PeerWorker per session, its tracks, channels and ICE setup."""
