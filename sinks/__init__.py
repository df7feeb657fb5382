"""Result consumers with no WebRTC inside (memory, video file, JSONL, webhook)."""
