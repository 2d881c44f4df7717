#!/usr/bin/env bash
# Issue 4's check: all eight methods head-to-head on BirdSong, 2 seeds, the dataset's defaults
# (linear model, PRODEN's tabular settings: SGD lr 1e-2, wd 1e-4, batch 100, 500 epochs; consistency
# and mixup off on tabular data). Writes results/ next to this file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-results}"; [[ "$out" = /* ]] || out="$here/$out"  # OUT: absolute, or under this folder
data="${DATA_DIR:-$here/../../../shared/data}"
pllzoo bench --methods solar,proden,cc,lws,mse,exp,valen,pico --dataset birdsong --data-dir "$data" \
  --seeds 1,2 --device cpu --out "$out" "$@"
