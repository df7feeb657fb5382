"""The Ray deployment when a node dies: how long a pipeline's results stop.

A Ray cluster on this machine (every node on 127.0.0.1): the head with one media replica, and
worker nodes that offer the ``pipelines`` resource pipeline actors ask for here. A pipeline
reads the RTSP test camera (320x240 at 30 fps, the detection workflow); each round removes
the node its actor runs on (its processes killed, as when a machine goes), adds a fresh node
for the next round, and measures from the removal to (a) ``list`` placing the pipeline on
another node and (b) the first ``consume`` result of a frame taken after the removal.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks failover'``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from ray.cluster_utils import Cluster

from benchmarks.common import write_result
from streaming.protocol.workflows import object_detection
from tests.support.camera import RTSPCamera
from tests.support.server import ray_server_process, wait_for

NODE = {"num_cpus": 0, "node_ip_address": "127.0.0.1", "resources": {"pipelines": 1}}
START_S, MOVE_S = 300, 120


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks failover", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    server = None
    rounds = []
    try:
        for _ in range(2):
            cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        server = ray_server_process(
            cluster.address, "1", ray_pipeline_resources='{"CPU": 0, "pipelines": 1}'
        )
        server.wait_for_output("Ray Serve replicas", timeout=START_S)
        server.wait_workers_ready(1, START_S)
        with RTSPCamera(320, 240, fps=30) as camera:
            started = server.start_pipeline(camera.url, object_detection())
            assert started.status_code == 200, started.text
            pipeline_id = started.json()["context"]["pipeline_id"]
            wait_for(lambda: server.fresh_result(pipeline_id), START_S, "a first result")
            for number in range(args.rounds):
                node = server.pipeline_nodes()[pipeline_id]
                victim = next(n for n in cluster.worker_nodes if n.node_id == node)
                removed = time.time()
                cluster.remove_node(victim)
                wait_for(
                    lambda node=node: server.pipeline_nodes().get(pipeline_id) not in (None, node),
                    MOVE_S,
                    "the pipeline on another node",
                )
                placed = time.time()
                wait_for(lambda at=removed: server.fresh_result(pipeline_id, at), MOVE_S, "results")
                resumed = time.time()
                rounds.append({"round": number + 1, "placed_s": round(placed - removed, 2),
                               "results_s": round(resumed - removed, 2)})  # fmt: skip
                print(json.dumps(rounds[-1]), flush=True)
                cluster.add_node(**NODE)  # the next round's spare
                cluster.wait_for_nodes()
    finally:
        if server is not None:
            server.stop()
        cluster.shutdown()
    summary = {
        "results_s_median": statistics.median(r["results_s"] for r in rounds),
        "results_s_max": max(r["results_s"] for r in rounds),
    }
    print(json.dumps(summary))
    write_result("failover", {"camera": [320, 240, 30], "workflow": "detect", "rounds": rounds,
                              **summary})  # fmt: skip


if __name__ == "__main__":
    main()
