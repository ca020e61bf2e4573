#!/bin/sh
# A stand-in for a training script that checkpoints: it trains "epochs" up to SEXTANT_FIDELITY,
# saving its position in SEXTANT_CHECKPOINT_DIR after each one, and resumes from there when
# promoted. The loss falls with the epochs towards a floor set by the learning rate and width.
# EPOCH_SECONDS (default 0.02) is how long one epoch takes.
set -eu
ckpt="${SEXTANT_CHECKPOINT_DIR:-.}/state"
# --no-checkpoint: behave like a script that never saves (every promotion starts over).
[ "${1:-}" = "--no-checkpoint" ] && ckpt=$(mktemp -u)
target="${SEXTANT_FIDELITY:-27}"
epoch=0
[ -f "$ckpt" ] && epoch=$(cat "$ckpt")
while [ "$epoch" -lt "${target%.*}" ]; do
  epoch=$((epoch + 1))
  sleep "${EPOCH_SECONDS:-0.02}"
  awk -v e="$epoch" -v lr="$SEXTANT_PARAM_LR" -v w="$SEXTANT_PARAM_WIDTH" 'BEGIN {
    l = log(lr) / log(10) + 2.5
    floor = 0.1 + 0.05 * l * l + 0.2 / w
    printf "epoch=%d loss=%.6f\n", e, floor + 1.0 / e
  }'
  echo "$epoch" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
done
[ "${1:-}" = "--no-checkpoint" ] && rm -f "$ckpt"
exit 0
