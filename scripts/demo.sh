#!/usr/bin/env bash
# Sets up, builds, and runs the lab demo: two nodes, three web pods, two clients.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
node harness/bin/switchyard-lab.js up "$@"
