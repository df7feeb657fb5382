#!/usr/bin/env bash
# Static checks CI runs before the suite: ruff (lint and format) and mypy on the packages.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check .
python3 -m ruff format --check .
python3 -m mypy
