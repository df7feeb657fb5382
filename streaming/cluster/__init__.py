"""The Ray deployment: the embedded server's app as Ray Serve replicas, each a full media
worker, behind a router that sends each offer to the replica with the fewest sessions;
pipelines as detached actors; ``kuberay`` renders the Kubernetes manifest.

Needs the ``ray`` extra (``pip install "visionstream[ray]"``), except ``kuberay``; nothing
outside this package imports it, except the CLI (``serve --ray``, ``deploy kuberay``).
"""
