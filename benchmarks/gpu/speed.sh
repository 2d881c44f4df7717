#!/usr/bin/env bash
# Issue 11's device step, one call: the GPU speed table (benchmarks/gpu_speed.py) for this checkout's
# path and for the path before issue 11 (commit 69bccc1, exported to .devold: PIL strong views
# through the view pool, host generators, per-step host reads), then the CUDA tests.
# Prepare here:  python benchmarks/gpu/slim_cifar.py --data-dir ../shared/data --out .devdata
#                mkdir .devold && git archive 69bccc1 pllzoo plugins | tar -x -C .devold
#                (both ignored through .git/info/exclude, both carried)
# On the device: OUT=$OUT bash benchmarks/gpu/speed.sh       (about 8 minutes on an H100)
set -uo pipefail
out="${OUT:?set OUT}"; data="${DATA_DIR:-.devdata}"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . -e plugins/solar -e plugins/baselines > "$out/install.log" 2>&1
{ date -u; nvidia-smi -L; python3 -c "import torch, torchvision; print(torch.__version__, torchvision.__version__, torch.cuda.get_device_name())"; } > "$out/env.txt" 2>&1
python3 -c "
from pathlib import Path; from pllzoo.data.jpeg import load_jpeg_archive
for f in ('train_jpeg.npz', 'test_jpeg.npz'): load_jpeg_archive(Path('$data') / 'cifar10_jpeg' / f)
" >> "$out/env.txt" 2>&1  # decode once; every run below reads the cache
timeout "${T_NEW:-200}" python3 benchmarks/gpu_speed.py --device cuda --data-dir "$data" --epochs 5 --warmup 2 \
  --paths device --out "$out/gpu_speed.json" > "$out/gpu_speed.log" 2>&1
echo "gpu_speed rc $?" >> "$out/env.txt"
PYTHONPATH=.devold:.devold/plugins/solar:.devold/plugins/baselines timeout "${T_OLD:-150}" python3 benchmarks/gpu_speed.py \
  --device cuda --data-dir "$data" --epochs 4 --warmup 2 --paths pil --out "$out/gpu_speed_before.json" \
  > "$out/gpu_speed_before.log" 2>&1
echo "gpu_speed before rc $?" >> "$out/env.txt"
timeout "${T_TEST:-110}" python3 -m pytest -q -o addopts="" -p no:cacheprovider tests/test_cuda.py \
  tests/unit/test_augment_batched.py tests/test_sync_free.py > "$out/pytest_cuda.log" 2>&1
echo "pytest rc $?" >> "$out/env.txt"
