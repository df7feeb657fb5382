"""Frame producers with no WebRTC inside (webcam, RTSP, files, MJPEG, synthetic)."""
