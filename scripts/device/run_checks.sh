#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU, as one script (run from the repository root on a GPU machine
# whose python3 has PyTorch, transformers and nvidia-ml-py; tokenwatch's other dependencies come as
# wheels in .whl/ when they are not installed). Everything it captures goes to $OUT (default ./device-out)
# as one archive, capture.tar.gz, plus run.log:
#   - nvidia-smi -q (idle and under load), --help-query-gpu, the default query streamed with -lms
#     (with and without units), nvidia-smi -q -d PERFORMANCE (clock-event reasons) under load
#   - NVML's raw answers beside what tokenwatch's NvmlReader made of them (idle and under load)
#   - a real LoadGen Offline and Server run whose tokens a random-weight Llama generates on the GPU
#     (scripts/device/gpu_sut.py), watched live by `tokenwatch watch --headless` twice at once: once
#     with gpu.source nvml, once with gpu.source nvidia-smi; each watch's recording, JSONL and stdout
set -u
OUT=${OUT:-$PWD/device-out}
CAP=$(mktemp -d)
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
step() { echo "== $(date +%T) $*"; }

if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || echo "wheel install failed"
fi
export PYTHONPATH=${PYTHONPATH:-$PWD}
PY=python3
TW="$PY -m tokenwatch"
FIELDS=$($PY -c "from tokenwatch.sources.nvidia_smi import DEFAULT_QUERY_FIELDS as f; print(','.join(f))")
$PY -c "import torch, transformers, pynvml, mlperf_loadgen, textual; print('torch', torch.__version__, torch.cuda.get_device_name(0), 'transformers', transformers.__version__, 'nvidia-ml-py', getattr(pynvml, '__version__', '?'), 'textual', textual.__version__)"
step "tokenwatch imports; query fields: $FIELDS"

step "nvidia-smi, idle"
nvidia-smi > "$CAP/nvidia-smi.txt" 2>&1
nvidia-smi -q > "$CAP/h200-idle.q.txt" 2>&1
nvidia-smi --help-query-gpu > "$CAP/help-query-gpu.txt" 2>&1
nvidia-smi --query-gpu="$FIELDS" --format=csv,noheader,nounits > "$CAP/idle.query-gpu.csv" 2>&1
grep -iE "energy|event_reasons\.[a-z_]+\b" "$CAP/help-query-gpu.txt" | head -40
$PY scripts/device/nvml_capture.py --seconds 3 --every 1 --label idle > "$CAP/nvml-idle.json" 2> "$CAP/nvml-idle.err" \
  || cat "$CAP/nvml-idle.err"

watch_config() {  # $1 gpu source, $2 LoadGen output folder
  cat <<EOF
run: {name: h200-$1, scenario: $3}
nodes: {gpus_per_node: 1}
gpu: {source: $1, interval: 1s}
progress:
  - {kind: loadgen-trace, path: $2/mlperf_log_trace.json, tokens_per_sample: 64}
  - {kind: loadgen-detail, path: $2/mlperf_log_detail.txt}
EOF
}

one_run() {  # $1 scenario, $2 min duration ms
  local lg="$CAP/loadgen-$1" watches=()
  mkdir -p "$lg"
  for src in nvml nvidia-smi; do
    watch_config "$src" "$lg" "$1" > "$CAP/watch-$1-$src.yaml"
    (timeout 420 $TW watch "$CAP/watch-$1-$src.yaml" --headless --interval 5s --stop-after 6m \
      --record "$CAP/watch-$1-$src.jsonl.zst" --jsonl "$CAP/watch-$1-$src.snapshots.jsonl" \
      > "$CAP/watch-$1-$src.stdout" 2> "$CAP/watch-$1-$src.stderr"; echo "watch $1 $src exit $?") &
    watches+=($!)
  done
  nvidia-smi --query-gpu="$FIELDS" --format=csv,noheader,nounits -lms 500 > "$CAP/load-$1.query-gpu.csv" 2>&1 &
  local smi=$!
  (sleep ${MID_S:-45}; nvidia-smi -q > "$CAP/h200-load-$1.q.txt" 2>&1; nvidia-smi -q -d PERFORMANCE,POWER,CLOCK \
    > "$CAP/h200-load-$1.perf.q.txt" 2>&1; nvidia-smi --query-gpu="$FIELDS" --format=csv \
    > "$CAP/load-$1.units.csv" 2>&1; $PY scripts/device/nvml_capture.py --seconds 4 --every 1 --label "load-$1" \
    > "$CAP/nvml-load-$1.json" 2> "$CAP/nvml-load-$1.err") &
  local mid=$!
  step "LoadGen $1 on the GPU"
  timeout 300 ${SUT:-$PY scripts/device/gpu_sut.py} --scenario "$1" --outdir "$lg" --min-duration-ms "$2" \
    > "$CAP/sut-$1.json" 2> "$CAP/sut-$1.stderr"
  echo "sut $1 exit $?: $(cat "$CAP/sut-$1.json")"; tail -3 "$CAP/sut-$1.stderr"
  wait $mid
  kill $smi 2>/dev/null
  step "waiting for the watches to end by themselves"
  for _ in $(seq 60); do pgrep -f "watch $CAP/watch-$1" > /dev/null || break; sleep 1; done
  pgrep -fa "watch $CAP/watch-$1" && echo "watches still running 60 s after LoadGen's result" \
    && pkill -INT -f "watch $CAP/watch-$1"
  wait "${watches[@]}"
  grep -E "tokens per second|Result is|samples per second" "$lg/mlperf_log_summary.txt"
  for src in nvml nvidia-smi; do echo "-- $src watch, last lines:"; tail -4 "$CAP/watch-$1-$src.stdout"; \
    tail -3 "$CAP/watch-$1-$src.stderr"; done
}

one_run Offline ${DUR_MS:-60000}
one_run Server ${DUR_MS:-60000}

step "packing"
rm -f "$CAP"/loadgen-*/mlperf_log_trace.json.gz
tar -C "$CAP" -czf "$OUT/capture.tar.gz" .
ls -la "$OUT"
