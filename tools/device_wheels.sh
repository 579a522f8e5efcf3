#!/usr/bin/env bash
# Fetch the wheels of tools/device_wheels.txt for the GPU machine (x86-64, CPython 3.12) into .whl/.
# Run from the repository root on a machine with a package index; docs/device-check.md says the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
plat=()
for n in 28 27 24 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
grep -v '^#' tools/device_wheels.txt | grep . | while read -r req; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${plat[@]}" --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$req"
done
du -sh .whl
