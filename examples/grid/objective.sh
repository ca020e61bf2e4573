#!/bin/sh
# A mixed space objective in plain shell: reads its parameters from the environment.
# loss = (log10(lr) + 3)^2 + (layers - 3)^2 / 4 + (act == tanh ? 0.1 : 0)
awk -v lr="$SEXTANT_PARAM_LR" -v layers="$SEXTANT_PARAM_LAYERS" -v act="$SEXTANT_PARAM_ACT" 'BEGIN {
  l = log(lr) / log(10) + 3
  loss = l * l + (layers - 3) * (layers - 3) / 4 + (act == "tanh" ? 0.1 : 0)
  printf "loss=%.6f\n", loss
}'
