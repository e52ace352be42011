#!/usr/bin/env bash
# The GPU run of issue 58 in one call (docs/gpu.md, "The GPU run"):
#
#   scripts/gpu-check.sh [--cpu] OUT_DIR
#
# On a bare machine with CUDA's compiler and no network: a venv from the wheels carried in
# .carry/wheels (scripts/gpu-carry.sh fills it), llama-cpp-python built from the carried sdist
# with GGML_CUDA=on for the GPU present, synthetic models of 1, 2 and 4 GiB, then
# `bench gpu-check`, `bench swap` (every layer on the GPU, warm then cold, then none on it),
# `bench decode` (the cost curve, GPU then CPU). Everything it writes goes to OUT_DIR, at
# most 8 files (the limit on what comes back from the device machine): log.txt, summary.json
# and one JSON report per measuring step; the summary's text ends the log. Exit 1 when the
# build or a check failed; a step that ran out of time is listed as incomplete, not failed.
#
# --cpu (or GPU_CHECK_CPU_REHEARSAL=1): the rehearsal on a machine without a GPU:
# -DGGML_CUDA=off, no nvidia-smi, the same steps (gpu-check then says it was skipped).
#
# Environment (defaults for the GPU run):
#   GPU_CHECK_BUDGET_S=570     the whole run; each step's timeout is cut to what is left
#   GPU_CHECK_BUILD_TIMEOUT_S=360
#   GPU_CHECK_JOBS=$(nproc)    CMAKE_BUILD_PARALLEL_LEVEL
#   GPU_CHECK_NICE=0           niceness of the build and the benches
#   GPU_CHECK_SIZES=1GiB,2GiB,4GiB   the synthetic models
#   GPU_CHECK_CONDITIONS=warm,cold   the swap bench's page-cache conditions
#   GPU_CHECK_PHASES=10        the swap bench's phases (rotation: reason code critic fix critic)
#   GPU_CHECK_CARRY=.carry     GPU_CHECK_WHEELS=$GPU_CHECK_CARRY/wheels
#   GPU_CHECK_WORK=/tmp/swapos-gpu-check   venv, build, models (reused by a second call on
#                              the same machine: the build and the models are then skipped)
#   GPU_CHECK_PREBUILT_WHEEL=  install this llama-cpp-python wheel instead of building
#   GPU_CHECK_CMAKE_EXTRA=     more CMake arguments for the build (-DGGML_CUDA_FA=OFF compiles
#                              the FlashAttention kernels as stubs: a faster build)
set -uo pipefail

usage="usage: scripts/gpu-check.sh [--cpu] OUT_DIR   (on the device machine: scripts/gpu-check.sh \"\$OUT\")"
CPU=${GPU_CHECK_CPU_REHEARSAL:-0}
OUT_DIR=
while (($#)); do
    case $1 in
        --cpu) CPU=1 ;;
        -h | --help) echo "$usage"; exit 0 ;;
        -*) echo "error: unknown option $1; $usage" >&2; exit 2 ;;
        *) OUT_DIR=$1 ;;
    esac
    shift
done
if [[ -z $OUT_DIR ]]; then
    echo "error: gpu-check.sh needs an output folder for its JSON reports and summary; $usage" >&2
    exit 2
fi

START=$(date +%s)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=${GPU_CHECK_CARRY:-$ROOT/.carry}
WHEELS=${GPU_CHECK_WHEELS:-$CARRY/wheels}
SDIST=$(ls "$CARRY"/sdist/llama_cpp_python-*.tar.gz 2>/dev/null | head -1)
if [[ ! -d $WHEELS || -z $SDIST ]]; then
    echo "error: no carried wheels in $WHEELS or no llama-cpp-python sdist in $CARRY/sdist:" \
        "run scripts/gpu-carry.sh first, and name .carry in the run tool's carry" >&2
    exit 2
fi
mkdir -p "$OUT_DIR" || exit 2
OUT=$(cd "$OUT_DIR" && pwd)
WORK=${GPU_CHECK_WORK:-/tmp/swapos-gpu-check}
mkdir -p "$WORK"
BUDGET_S=${GPU_CHECK_BUDGET_S:-570}
BUILD_TIMEOUT_S=${GPU_CHECK_BUILD_TIMEOUT_S:-360}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
NICE=${GPU_CHECK_NICE:-0}
SIZES=${GPU_CHECK_SIZES:-1GiB,2GiB,4GiB}
CONDITIONS=${GPU_CHECK_CONDITIONS:-warm,cold}
PHASES=${GPU_CHECK_PHASES:-10}
RESERVE_S=15 # kept for the summary
MIN_STEP_S=20
VENV=$WORK/venv
PY=$VENV/bin/python
HELPER=$ROOT/scripts/gpu_check.py
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1 XDG_CACHE_HOME=$WORK/xdg
: >"$WORK/steps.jsonl"
rm -f "$WORK/build.json" "$WORK/probe.json" "$WORK/machine.txt"
exec > >(tee "$OUT/log.txt") 2>&1
TEE_PID=$!

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
left() { echo $((START + BUDGET_S - RESERVE_S - $(date +%s))); }

record() { # record STEP RC SECONDS TIMEOUT [SKIPPED_REASON]
    local timed_out=false skipped=null
    [[ $2 == 124 || $2 == 137 ]] && timed_out=true
    [[ -n ${5:-} ]] && skipped="\"$5\""
    printf '{"step": "%s", "rc": %d, "seconds": %.1f, "timeout_s": %d, "timed_out": %s, "skipped": %s}\n' \
        "$1" "$2" "$3" "$4" "$timed_out" "$skipped" >>"$WORK/steps.jsonl"
}

step() { # step NAME CAP_S CMD...: CMD under a timeout of CAP_S or what is left, if less
    local name=$1 cap=$2 t rc t0
    shift 2
    t=$(left)
    ((cap < t)) && t=$cap
    if ((t < MIN_STEP_S)); then
        echo "== $name: skipped, ${t}s left"
        record "$name" 1 0 "$t" "out of time"
        return 1
    fi
    echo "== $name (timeout ${t}s) $(date -u +%H:%M:%S)"
    t0=$(now)
    if [[ -n ${STEP_LOG:-} ]]; then
        timeout --kill-after=10 "$t" nice -n "$NICE" "$@" >"$STEP_LOG" 2>&1
    else
        timeout --kill-after=10 "$t" nice -n "$NICE" "$@"
    fi
    rc=$?
    record "$name" "$rc" "$(since "$t0")" "$t"
    echo "== $name: exit $rc in $(since "$t0")s"
    return $rc
}

skip() { record "$1" "$2" 0 0 "$3"; echo "== $1: skipped ($3)"; } # skip STEP RC REASON

finish() {
    echo "== summary $(date -u +%H:%M:%S), $(($(date +%s) - START))s in all"
    local gpu=()
    ((CPU)) || gpu=(--gpu)
    python3 "$HELPER" summary --work "$WORK" --out "$OUT" "${gpu[@]}"
    local rc=$?
    exec >&- 2>&-
    wait "$TEE_PID"
    exit $rc
}

# --- the machine ---------------------------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "mode: $( ((CPU)) && echo 'CPU rehearsal' || echo GPU)"
    echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "python3: $(python3 --version 2>&1) at $(command -v python3)"
    echo "cpus: $(nproc); memory: $(free -g | awk '/Mem:/ {print $2}') GiB; /tmp free: $(df -h /tmp | awk 'NR==2 {print $4}')"
    echo "cmake: $(cmake --version 2>/dev/null | head -1 || echo none); ninja: $(ninja --version 2>/dev/null || echo none)"
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -2 | tr '\n' ' ' || echo none)"
    ((CPU)) || nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv
    echo "carried: $(du -sh "$CARRY" | cut -f1) in $CARRY; sdist $(basename "$SDIST")"
} 2>&1 | tee "$WORK/machine.txt"

if ((CPU)); then
    CMAKE_ARGS="-DGGML_CUDA=off -DLLAVA_BUILD=OFF"
else
    ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
    if [[ -z $ARCH ]]; then
        echo "error: nvidia-smi gave no compute capability: is there a GPU? (--cpu to rehearse)"
        skip build 1 "no GPU found by nvidia-smi"
        finish
    fi
    if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
        export PATH=/usr/local/cuda/bin:$PATH
    fi
    CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$ARCH -DLLAVA_BUILD=OFF"
fi
CMAKE_ARGS="$CMAKE_ARGS ${GPU_CHECK_CMAKE_EXTRA:-}"

# --- the venv, from the carried wheels ---------------------------------------------------------
REQ=$ROOT/scripts/gpu-requirements.txt
venv_key="$(sha256sum "$REQ" | cut -c1-16) $(python3 --version 2>&1)"
if [[ -x $PY && "$(cat "$VENV/.key" 2>/dev/null)" == "$venv_key" ]]; then
    echo "== venv: reused ($VENV)"
    record venv 0 0 0
else
    rm -rf "$VENV"
    pip_whl=$(ls "$WHEELS"/pip-*.whl | head -1)
    # --without-pip, then pip from its carried wheel: the machine's python3 may lack ensurepip
    step venv 120 bash -c "python3 -m venv --without-pip '$VENV' &&
        '$PY' '$pip_whl/pip' install -q --no-index --find-links '$WHEELS' pip &&
        '$PY' -m pip install -q --no-index --find-links '$WHEELS' -r '$REQ'" || finish
    echo "$venv_key" >"$VENV/.key"
fi

# --- the synthetic models, written while llama-cpp-python builds ---------------------------
step models 300 "$PY" "$HELPER" models --dir "$WORK/models" --sizes "$SIZES" &
models_pid=$!

# --- llama-cpp-python ------------------------------------------------------------------------
build_key="$(sha256sum "$SDIST" | cut -c1-16) $CMAKE_ARGS"
wheel=$(ls "$WORK"/wheel/llama_cpp_python-*.whl 2>/dev/null | head -1)
reused=false
if [[ -n ${GPU_CHECK_PREBUILT_WHEEL:-} ]]; then
    rm -rf "$WORK/wheel" && mkdir -p "$WORK/wheel" && cp "$GPU_CHECK_PREBUILT_WHEEL" "$WORK/wheel/"
    wheel=$WORK/wheel/$(basename "$GPU_CHECK_PREBUILT_WHEEL")
    skip build 0 "prebuilt wheel $(basename "$wheel")"
    build_s=0
elif [[ -n $wheel && "$(cat "$WORK/wheel/.key" 2>/dev/null)" == "$build_key" ]]; then
    skip build 0 "reused $(basename "$wheel") from an earlier call"
    reused=true
    build_s=0
else
    rm -rf "$WORK/wheel"
    echo "CMAKE_ARGS=$CMAKE_ARGS CMAKE_BUILD_PARALLEL_LEVEL=$JOBS (build log: $WORK/build.log)"
    t0=$(now)
    STEP_LOG=$WORK/build.log step build "$BUILD_TIMEOUT_S" env CMAKE_ARGS="$CMAKE_ARGS" \
        CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$PY" -m pip wheel -v --no-index \
        --find-links "$WHEELS" --no-build-isolation --no-deps -w "$WORK/wheel" "$SDIST"
    rc=$?
    build_s=$(since "$t0")
    tail -n $((rc ? 80 : 3)) "$WORK/build.log"
    wheel=$(ls "$WORK"/wheel/llama_cpp_python-*.whl 2>/dev/null | head -1)
    [[ $rc == 0 && -n $wheel ]] && echo "$build_key" >"$WORK/wheel/.key"
fi
printf '{"cmake_args": "%s", "jobs": %d, "seconds": %.1f, "reused": %s, "wheel": "%s", "wheel_bytes": %d, "sdist": "%s", "prebuilt": "%s"}\n' \
    "$CMAKE_ARGS" "$JOBS" "$build_s" "$reused" "$(basename "${wheel:-none}")" \
    "$(stat -c %s "${wheel:-/dev/null}" 2>/dev/null || echo 0)" "$(basename "$SDIST")" \
    "${GPU_CHECK_PREBUILT_WHEEL:-}" >"$WORK/build.json"
if [[ -z $wheel ]]; then
    wait $models_pid
    finish
fi
step install 60 "$PY" -m pip install -q --no-index --no-deps --force-reinstall "$wheel" || finish
step probe 60 "$PY" -c "
import json, sys, llama_cpp
from swapos.sysinfo import backend_devices, gpu_devices, gpu_offload_supported, host_info
gpu = $((1 - CPU))
info = {'llama_cpp': llama_cpp.__version__, 'gpu_offload': gpu_offload_supported(),
        'devices': host_info().get('devices'), 'gpus': len(gpu_devices())}
print(json.dumps(info))
open('$WORK/probe.json', 'w').write(json.dumps(info, indent=2))
sys.exit(1 if gpu and not (info['gpu_offload'] and info['gpus']) else 0)
" || finish
wait $models_pid || finish
cpu_flag=()
((CPU)) && cpu_flag=(--cpu)
step profiles 60 "$PY" "$HELPER" profiles --dir "$WORK/models" --work "$WORK" "${cpu_flag[@]}" ||
    finish

# --- the measurements, most wanted first (a step cut short by the time left writes no JSON) ----
bench=("$PY" -m swapos.bench)
models_json=$WORK/models/models.json
small=$(python3 -c "import json; print(list(json.load(open('$models_json')))[0])")
large=$(python3 -c "import json; print(list(json.load(open('$models_json')))[-1])")
step gpu-check 120 "${bench[@]}" gpu-check --profile "$WORK/check.toml" --phases 6 --tokens 32 \
    --out "$OUT/gpu-check.json"
swap_gpu() { # swap_gpu CONDITION CAP_S
    step "swap-gpu-$1" "$2" "${bench[@]}" swap --profile "$WORK/gpu.toml" --schedule rotation \
        --phases "$PHASES" --tokens 48 --repeats 1 --rounds 1 --conditions "$1" \
        --modes overlap,lru,sequential --out "$OUT/swap-gpu-$1.json"
}
if [[ ,$CONDITIONS, == *,warm,* ]]; then
    swap_gpu warm 180
else
    skip swap-gpu-warm 0 "not in GPU_CHECK_CONDITIONS"
fi
step decode-gpu 90 "${bench[@]}" decode --profile "$WORK/gpu.toml" --models "$small,$large" \
    --sizes 2,4,8,12,16 --repeats 3 --results "$WORK/no-capsules" --no-save \
    --out "$OUT/decode-gpu.json"
if [[ ,$CONDITIONS, == *,cold,* ]]; then
    swap_gpu cold 180
else
    skip swap-gpu-cold 0 "not in GPU_CHECK_CONDITIONS"
fi
step swap-cpu 120 "${bench[@]}" swap --profile "$WORK/cpu.toml" --schedule rotation --phases 5 \
    --tokens 16 --repeats 1 --rounds 1 --conditions warm --modes overlap,lru \
    --out "$OUT/swap-cpu.json"
step decode-cpu 60 "${bench[@]}" decode --profile "$WORK/cpu.toml" --models "$small" \
    --sizes 2,4,8,12,16 --repeats 3 --results "$WORK/no-capsules" --no-save \
    --out "$OUT/decode-cpu.json"
finish
