"""Where the deployment's actors are found: one Ray namespace, the worker directory's name
in it; pipeline actors are named by their pipeline ids."""

NAMESPACE = "visionstream"
DIRECTORY = "visionstream-workers"
