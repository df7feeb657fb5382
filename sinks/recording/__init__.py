"""Recording a camera's video as it arrives: the packets written to segment files as they
come (``recorder``), the files indexed, salvaged and retired (``segments``), a time range cut
out of them as one file (``export``). It consumes video, as every sink here does; outbound
live video (restreaming the annotated picture) belongs beside it, in ``sinks/``."""
