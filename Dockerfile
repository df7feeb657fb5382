# visionstream on an NVIDIA GPU: ONNX Runtime's CUDA provider when the container gets a GPU
# (docker run --gpus all), OpenVINO on the CPU when it does not. CUDA 13 and cuDNN 9 are what
# onnxruntime-gpu 1.31 is built for (host driver 580 or newer).
#   docker build -t visionstream .
#   docker run --gpus all --network host -v visionstream-models:/models visionstream
# WebRTC media flows over UDP ports aiortc picks at random: use host networking, or a TURN
# relay (VISIONSTREAM_ICE_SERVERS) when the container must stay on a bridge network.
FROM nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 VISIONSTREAM_HOST=0.0.0.0 VISIONSTREAM_MODELS_DIR=/models \
    VISIONSTREAM_TRT_CACHE_DIR=/models/.trt-engines VISIONSTREAM_SINK_DIR=/data/sinks \
    VISIONSTREAM_RESTREAM_RTSP_PORT=8555
# srt-tools: srt-live-transmit receives srt:// streams and sends SRT pushes (PyAV's FFmpeg has
# no libsrt).
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip srt-tools \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 visionstream \
    && mkdir -p /models /data && chown visionstream:visionstream /models /data

WORKDIR /app
COPY pyproject.toml README.md ./
COPY streaming streaming
COPY sources sources
COPY sinks sinks
COPY web web
# EXTRAS=ray for the Ray deployment (KubeRay: visionstream deploy kuberay).
ARG EXTRAS=""
RUN python3 -m pip install ".${EXTRAS:+[$EXTRAS]}" && rm -rf /app/build

USER visionstream
# The default model is fetched and converted at build time, so a fresh volume starts with it.
RUN visionstream models pull
VOLUME ["/models", "/data"]
# 8555: restreams over RTSP (each pipeline source's annotated picture, docs/guide/restream.md).
EXPOSE 9001 8555
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
    CMD python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9001/healthz', timeout=4)"
ENTRYPOINT ["visionstream"]
CMD ["serve"]
