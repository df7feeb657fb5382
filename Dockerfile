# GPU image: onnxruntime-gpu uses CUDA when the container gets a GPU (--gpus all), CPU otherwise.
FROM nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04
ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 STREAMING_HOST=0.0.0.0
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY streaming streaming
COPY sources sources
COPY sinks sinks
COPY web web
RUN python3 -m pip install --no-cache-dir . && visionstream models pull
EXPOSE 9001
# aiortc picks random UDP ports for media: run with --network host, or configure a TURN relay.
CMD ["visionstream", "serve"]
