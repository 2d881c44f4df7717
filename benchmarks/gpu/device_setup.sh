# Sourced by the device scripts (graphs.sh, graphs2.sh, ltpll.sh): OUT and DATA_DIR, the editable install of pllzoo
# and its three plugins on a fresh device machine (once), the device's identity in $OUT/env.txt, and
# `step NAME SECONDS CMD...` (run CMD with a time limit, its output in $OUT/NAME.log, rc and seconds in env.txt).
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-.devdata}"
export PYTHONUNBUFFERED=1
python3 -m pip show -q pllzoo-ltpll 2>/dev/null || python3 -m pip install -q --no-deps --no-build-isolation \
  -e . -e plugins/solar -e plugins/baselines -e plugins/ltpll > "$out/install.log" 2>&1
{ date -u; nvidia-smi -L; python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"; } > "$out/env.txt" 2>&1
step() {
  local name=$1 limit=$2; shift 2; local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name rc $? $((SECONDS - t0)) s" >> "$out/env.txt"
}
