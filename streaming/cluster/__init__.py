"""The Ray deployment: the embedded server's app as Ray Serve replicas, each a full media
worker, behind a router that sends each offer to the replica with the fewest sessions.

Needs the ``ray`` extra (``pip install "visionstream[ray]"``); nothing outside this package
imports it, except the CLI's ``serve --ray``.
"""

from .run import deploy, serve_on_ray, undeploy

__all__ = ["deploy", "serve_on_ray", "undeploy"]
