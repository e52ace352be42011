#!/usr/bin/env bash
# Fill the carry folder that scripts/gpu-check.sh installs from on the GPU machine, which has
# no network (docs/gpu.md, "The GPU run").
#
#   scripts/gpu-carry.sh [CARRY_DIR]          (default: .carry, ignored by git)
#
#   CARRY_DIR/wheels/   wheels of scripts/gpu-requirements.txt and pip, for the target Python
#   CARRY_DIR/sdist/    llama-cpp-python's sdist, trimmed (see TRIM below)
#   CARRY_DIR/MANIFEST.txt  what was downloaded, its digests, what was trimmed, the sizes
#
# Environment:
#   GPU_CARRY_PYTHON  the target's Python version (default 3.12: the GPU machine's python3)
#   GPU_CARRY_CMAKE=1 also carry a CMake wheel (~30 MB; by default the machine's CMake is used)
#   GPU_CARRY_SDIST=0 skip the sdist (wheels only: a CPU rehearsal for another Python)
#   PYTHON            the Python whose pip downloads (default: python3)
#
# The sdist as published is 73 MiB, over the 64 MiB that travels to the GPU machine: its
# vendored llama.cpp git pack, tokenizer test vocabularies, docs and benchmarks are removed
# (none is read by the build; the CPU rehearsal builds the trimmed sdist).
set -euo pipefail
cd "$(dirname "$0")/.."

CARRY=${1:-.carry}
PYVER=${GPU_CARRY_PYTHON:-3.12}
PY=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
LIMIT=$((64 << 20))
TRIM=(
    .git
    vendor/llama.cpp/models/ggml-vocab-*
    vendor/llama.cpp/docs
    vendor/llama.cpp/benches
    vendor/llama.cpp/media
    vendor/llama.cpp/tools/ui
)
PLATFORMS=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
    PLATFORMS+=(--platform "${tag}_x86_64")
done

rm -rf "$CARRY/wheels"
mkdir -p "$CARRY/wheels" "$CARRY/sdist"
extra=()
[[ ${GPU_CARRY_CMAKE:-0} == 1 ]] && extra+=(cmake)
echo "== wheels for CPython $PYVER (x86_64 manylinux) into $CARRY/wheels"
"$PY" -m pip download -q --only-binary=:all: --implementation cp --python-version "$PYVER" \
    "${PLATFORMS[@]}" -d "$CARRY/wheels" -r scripts/gpu-requirements.txt pip "${extra[@]}"

if [[ ${GPU_CARRY_SDIST:-1} == 1 ]]; then
    echo "== llama-cpp-python $LLAMA_VERSION sdist, trimmed, into $CARRY/sdist"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_VERSION" \
        -d "$tmp"
    orig="$tmp/llama_cpp_python-$LLAMA_VERSION.tar.gz"
    orig_sha=$(sha256sum "$orig" | cut -d' ' -f1)
    orig_bytes=$(stat -c %s "$orig")
    tar xzf "$orig" -C "$tmp"
    top="llama_cpp_python-$LLAMA_VERSION"
    (cd "$tmp/$top" && for p in "${TRIM[@]}"; do rm -rf $p; done)
    rm -f "$CARRY"/sdist/*.tar.gz
    tar czf "$CARRY/sdist/$top.tar.gz" -C "$tmp" "$top"
fi

wheels_bytes=$(du -sb "$CARRY/wheels" | cut -f1)
carry_bytes=$(du -sb "$CARRY" | cut -f1)
checkout_bytes=$(git archive HEAD | wc -c)
total=$((carry_bytes + checkout_bytes))
{
    echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/gpu-carry.sh"
    echo "target: CPython $PYVER, x86_64 manylinux ($(printf '%s ' "${PLATFORMS[@]}"))"
    if [[ ${GPU_CARRY_SDIST:-1} == 1 ]]; then
        echo "sdist: llama-cpp-python $LLAMA_VERSION from PyPI, $orig_bytes bytes, sha256 $orig_sha"
        echo "trimmed: ${TRIM[*]}"
        echo "carried sdist: $(stat -c %s "$CARRY/sdist/$top.tar.gz") bytes"
    fi
    echo "wheels: $wheels_bytes bytes"
    ls "$CARRY/wheels"
    echo "carry folder: $carry_bytes bytes; checkout (git archive HEAD): $checkout_bytes bytes"
    echo "together: $total of $LIMIT bytes"
} >"$CARRY/MANIFEST.txt"
cat "$CARRY/MANIFEST.txt"
if ((total > LIMIT)); then
    echo "error: the checkout and $CARRY together are $total bytes, over the 64 MiB that" \
        "travels to the GPU machine: carry less (GPU_CARRY_CMAKE=0) or trim more" >&2
    exit 1
fi
