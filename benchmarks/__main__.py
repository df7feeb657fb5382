"""``python -m benchmarks NAME [args]``: run one benchmark (``--help`` after NAME for its own)."""

from __future__ import annotations

import importlib
import sys

from benchmarks import common  # noqa: F401 - puts the repository on sys.path

NAMES = {
    "latency": "glass-to-glass latency, drops and drift (default model and blur)",
    "throughput": "every-frame fps over the upload path and a client track vs decode+inference",
    "concurrency": "N sessions: delivered fps, p95 latency, server CPU and RSS",
    "session-cost": "POST to first annotated frame, and server RSS per extra session",
    "scale": "the Ray deployment: sessions held per replica count, and Ray's latency cost",
    "analytics": "tracker, line counter, time in zone and their drawing per frame vs the model",
    "model-tasks": "segmentation masks, keypoints and classification: our post-processing cost",
    "failover": "the Ray deployment: a pipeline's node removed -> its results again",
    "churn": "sessions of every kind opened and ended in rounds: resources back to baseline, RSS",
    "reference": "side by side with the reference server (installs it on request)",
    "batching": "8 sessions with and without the dynamic batcher",
    "batcher-policy": "the batcher before and after a commit, in front of an emulated GPU",
    "inference": "the default model on every backend, no server around",
    "encoder": "aiortc's VP8 encoder vs ours (denoiser off): time, bitrate, PSNR",
    "codecs": "VP8 vs H.264, aiortc's and ours: CPU per frame to encode and decode, 480p, 720p",
    "reach": "TURN relay vs host candidates (connect, latency); WHIP publish -> WHEP latency",
    "stages": "where a frame's time goes, stage by stage",
    "clients": "our client vs inference-sdk on the same live feed",
    "upload": "uploaded files: the whole path vs decode + inference alone",
    "cameras": "camera -> viewer latency, restart -> processed again",
    "browser": "the page in Chromium: Start -> first frame, the page's latency",
    "http-api": "inference-sdk's infer and run_workflow: rps, p50/p95 at 1/4/16 callers vs V2",
    "events": "the event store: inserts/s, per-frame cost kept or not, /events p95 at 1M events",
    "recording": "a camera read with and without recording its packets: CPU per camera",
    "hostile": "the attacker's requests (20,000 candidates, deep JSON, trickle) before and after",
    "ab": "this checkout's server vs an earlier commit's, alternated (setup, blur, CPU, pipeline)",
    "compile-ab": "compiling the suite's largest workflow, this checkout vs an earlier commit's",
    "two-stage": "detect, crop, classify every crop (batched or not) vs one stage; sliced 2x2, 3x3",
    "sampling": "max_fps on live cameras: results a second vs asked, this checkout vs earlier",
    "cameras-per-box": "N 720p cameras, a pipeline each: CPU per camera, slowest rate, gated",
    "rect-input": "the default model at 416x416 vs 416x256 (16:9 rect) on OpenVINO: CPU per run",
    "search": "search by meaning: the 20 nearest of 100,000 768-d vectors, SQLite and PostgreSQL",
    "vlm-held": "a live VLM step between questions: ms per 720p frame, this checkout vs earlier",
    "restream": "CPU per restreamed 720p source (1, 4, 16) vs pipelines alone; latency by protocol",
    "vlm": "a slow VLM step (3 s an answer) vs none: pipeline results/s and live session fps",
    "gpu-bundle": "what the lent GPU machine lacks, two folders: then bash benchmarks/gpu/run.sh",
    "plots": "PNG plots from the results",
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in NAMES:
        width = max(map(len, NAMES))
        listing = "\n".join(f"  {name:<{width}}  {what}" for name, what in NAMES.items())
        print(f"usage: python -m benchmarks NAME [args]\n\n{listing}", file=sys.stderr)
        sys.exit(2)
    name = sys.argv[1]
    module = importlib.import_module(f"benchmarks.{name.replace('-', '_')}")
    sys.argv = [f"benchmarks {name}", *sys.argv[2:]]
    module.main()


if __name__ == "__main__":
    main()
