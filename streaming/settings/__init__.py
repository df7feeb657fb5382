"""The server's settings by concern, each field documented where it is declared: one class
per concern (server, media, security, cameras, inference, storage, notifications, cluster),
each a base of ``streaming.config.Settings``, so every field is still ``settings.<name>``,
read from ``VISIONSTREAM_<NAME>``. ``reference`` writes the guide's settings page from them."""
