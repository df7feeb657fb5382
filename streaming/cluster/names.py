"""Where the deployment's actors are found: one Ray namespace, the worker directory's name
in it; pipeline actors are named by their pipeline ids."""

NAMESPACE = "visionstream"
APP_NAME = "visionstream"
"""The Serve application: the media replicas and any model deployments."""
DIRECTORY = "visionstream-workers"
