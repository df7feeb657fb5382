"""``python -m benchmarks compile-ab --before REV``: how long compiling the largest workflow of
the suite takes (``tests/support/every_block.py``: a step of every block version we ship's
sample and every query-language operation, models loaded once beforehand), this checkout
against an earlier commit's, alternated in rounds on the same machine.

Each side runs in its own process from its own checkout (a temporary git worktree for
``--before``), compiling the same specification with the same models directory (the default
model and the suite's constant ``tiny-*`` exports) ``--compiles`` times after one warm-up.
Results: ``results/<out>.json``, the p50 and p90 per side and round, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, write_result

_PROBE = """
import json, sys, time
from streaming.config import Settings
from streaming.inference.registry import ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext

spec = json.loads(open(sys.argv[1]).read())
registry = ModelRegistry(Settings(models_dir=sys.argv[2]))
context = BuildContext(registry)
compile_workflow(parse_spec(spec), context).close()  # models loaded once, outside the clock
times = []
for _ in range(int(sys.argv[3])):
    started = time.perf_counter()
    workflow = compile_workflow(parse_spec(spec), context)
    times.append((time.perf_counter() - started) * 1000)
    workflow.close()
print(json.dumps(times))
"""


def _models(scratch: Path) -> Path:
    from streaming.config import Settings
    from tests.support.models import add_tiny_task_models

    models = scratch / "models"
    models.mkdir()
    default = Settings().models_dir / Settings().default_model
    if not default.is_dir():
        sys.exit(f"no default model in {default}: run the server once (or tests/install.sh)")
    shutil.copytree(default, models / default.name)
    add_tiny_task_models(models, scratch)
    return models


def _side(root: Path, spec: Path, models: Path, compiles: int) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(spec), str(models), str(compiles)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )
    if done.returncode != 0:
        sys.exit(f"{root}: {done.stderr[-2000:]}")
    return [float(t) for t in json.loads(done.stdout.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(prog="benchmarks compile-ab", description=__doc__)
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compiles", type=int, default=30)
    parser.add_argument("--out", default="compile-ab")
    args = parser.parse_args()
    from tests.support.every_block import every_block_workflow

    with tempfile.TemporaryDirectory(prefix="compile-ab-") as scratch_name:
        scratch = Path(scratch_name)
        spec = scratch / "every_block.json"
        spec.write_text(json.dumps(every_block_workflow()))
        models = _models(scratch)
        before = scratch / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(before), args.before],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            sides = {"after": ROOT, "before": before}
            rounds: list[dict[str, Any]] = []
            for index in range(args.rounds):
                order = list(sides) if index % 2 == 0 else list(reversed(sides))
                measured = {name: _side(sides[name], spec, models, args.compiles) for name in order}
                rounds.append(
                    {
                        name: {
                            "p50_ms": round(statistics.median(times), 2),
                            "p90_ms": round(statistics.quantiles(times, n=10)[-1], 2),
                        }
                        for name, times in measured.items()
                    }
                )
                print(json.dumps(rounds[-1]), flush=True)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, capture_output=True
            )
    ratio = statistics.median(r["after"]["p50_ms"] / r["before"]["p50_ms"] for r in rounds)
    result = {
        "before": args.before,
        "steps": len(every_block_workflow()["steps"]),
        "compiles": args.compiles,
        "rounds": rounds,
        "after_over_before_p50": round(ratio, 3),
    }
    write_result(args.out, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
