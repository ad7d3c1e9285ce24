#!/bin/bash
# The GPU checks of issue 16 in one script, for a machine with an NVIDIA GPU, cupy and torch:
# the GPU benchmarks (rill vs PyTorch on the same GPU), every op sample forward and gradient on
# the GPU against the CPU (counts in $OUT/samples.json), and the training / error / swap_memory
# tests. Each section has its own time limit, so one failing section does not stop the others.
#
#   OUT=/tmp/gpu_out bash tools/gpu_check.sh [wheel_dir]
#
# wheel_dir: wheels to install first (protobuf >= 7 if the machine's is older), fetched on a
# machine with a registry (both are pure-Python or abi3 wheels; keep the folder out of commits,
# e.g. in .git/info/exclude, and name it in the device tool's carry):
#   pip download -q --no-deps --only-binary=:all: -d .whl 'protobuf>=7.35,<8' tensorboardX
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
R=$(pwd)
export PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/site:$R/packages/graph/src:$R/packages/exec/src:$R/packages/autodiff/src:$R/packages/train/src:$R/packages/mobile/src:$R/packages/distributed/src:$R/packages/compat/src:$R
if [ -n "${1:-}" ] && ls "$1"/*.whl >/dev/null 2>&1; then
  timeout 60 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site "$1"/*.whl
fi
{
  nvidia-smi -L
  timeout 60 python3 -c "import cupy, numpy, google.protobuf as p, torch; \
print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'protobuf', p.__version__, \
'torch', torch.__version__, torch.cuda.get_device_name(0))"
} 2>&1 | tee "$OUT/env.log"

PYTEST="python3 -m pytest -q -p no:cacheprovider -o addopts= --import-mode=importlib -rfE"

section_bench() {
echo "== benchmarks" | tee "$OUT/bench.log"
RILL_BENCH_JSON=$OUT/bench.json timeout "${BENCH_S:-110}" python3 -m tools.bench gpu 2>&1 \
  | tee -a "$OUT/bench.log"

}

section_samples() {
echo "== op samples on the GPU" | tee "$OUT/samples.log"
RILL_GPU_REPORT=$OUT/samples timeout "${SAMPLES_S:-240}" $PYTEST -m gpu tests/gpu \
  -k sample_on_gpu $([ "${WORKERS:-16}" != 0 ] && echo "-n ${WORKERS:-16}") --timeout 90 2>&1 | tail -60 | tee -a "$OUT/samples.log"
python3 - "$OUT" <<'PY' 2>&1 | tee -a "$OUT/samples.log"
import glob, json, sys
out = sys.argv[1]
tot = {"samples_run": 0, "of_which_extras": 0, "matching": 0, "failing": 0,
       "sample_op_ran_on_gpu": 0, "failures": {}}
for f in glob.glob(f"{out}/samples.gw*") + glob.glob(f"{out}/samples"):
    d = json.load(open(f))
    for k in ("samples_run", "of_which_extras", "matching", "failing", "sample_op_ran_on_gpu"):
        tot[k] += d[k]
    tot["failures"].update(d["failures"])
json.dump(tot, open(f"{out}/samples.json", "w"), indent=1)
print({k: v for k, v in tot.items() if k != "failures"})
PY
rm -f "$OUT"/samples.gw*

}

section_train() {
echo "== training, errors, swap_memory, CUDA graphs" | tee "$OUT/train.log"
timeout "${TRAIN_S:-150}" $PYTEST -m gpu tests/gpu -k "not sample_on_gpu" -s --timeout 90 2>&1 \
  | tail -80 | tee -a "$OUT/train.log"
}

# SECTIONS: which sections, in which order (default: all three, benchmarks first).
for sec in ${SECTIONS:-bench samples train}; do
  "section_$sec"
done
if [ "${PROFILE:-0}" = 1 ]; then
  echo "== profile (tools/gpu_profile.py ${PROFILE_CASES:-}) in $OUT/profile.txt"
  timeout "${PROFILE_S:-120}" python3 -m tools.gpu_profile ${PROFILE_CASES:-} > "$OUT/profile.txt" 2>&1
  grep "^== " "$OUT/profile.txt"
fi
echo "== done"
