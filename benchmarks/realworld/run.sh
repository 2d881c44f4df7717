#!/usr/bin/env bash
# Real-world PLL sets (issue 5): all eight methods on the PALM .mat files from ../shared/data,
# both test protocols, 5 seeds, the linear model, consistency and mixup off (tabular data).
# One results folder per (dataset, split); --resume makes an interrupted run continue.
#   METHODS (default: the eight below; the LT-PLL methods after SoLar: corr,corr-records,htc),
#   DATASETS (default: lost birdsong msrcv2 fgnet italian), SPLITS (uniform balanced),
#   SEEDS (1,2,3,4,5), EPOCHS (default 200; italian 50, about the same number of SGD steps),
#   RESULTS (default: results/ here; benchmarks/sinkhorn-relax/run.sh points it at its own), TABLES (1; 0: no tables.sh)
set -euo pipefail
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # one core per run: the recorded numbers used 1 thread
here="$(cd "$(dirname "$0")" && pwd)"
data="${DATA_DIR:-$here/../../../shared/data}"
for dataset in ${DATASETS:-lost birdsong msrcv2 fgnet italian}; do
  default_epochs=200
  if [ "$dataset" = italian ]; then default_epochs=50; fi  # 17.5k training rows: 175 steps an epoch
  for split in ${SPLITS:-uniform balanced}; do
    pllzoo bench --methods "${METHODS:-solar,proden,cc,lws,mse,exp,valen,pico}" --dataset "$dataset" --split "$split" \
      --data-dir "$data" --seeds "${SEEDS:-1,2,3,4,5}" --epochs "${EPOCHS:-$default_epochs}" --device cpu \
      --resume --out "${RESULTS:-$here/results}/$dataset-$split" "$@"
  done
done
if [ "${TABLES:-1}" = 1 ]; then "$here/tables.sh"; fi
