#!/usr/bin/env bash
# GPU training throughput, Sextant's CUDA backend vs the machine's PyTorch, side by side in one
# invocation: the Fashion-MNIST-shaped MLP 784-512-256-10 (ReLU), Adam, FP32 (no TF32 on either
# side), batch sizes 128 and 4096, 50,000 synthetic examples (throughput does not depend on the
# pixels; the bare GPU machine has no dataset package). Reports the median over --runs of the
# last epoch's samples/s, the ratio, and the achieved fraction of the GPU's FP32 GEMM peak
# (measured in the same run with torch.mm on 8192x8192 matrices) at batch 4096.
# Writes a markdown section to stdout.
# usage: bench/trainer/gpu_bench.sh PATH/TO/sextant-train [--runs N (3)] [--epochs E (3)]
set -euo pipefail
TRAIN=$1; shift
RUNS=3; EPOCHS=3
while [[ $# -gt 0 ]]; do
  case $1 in --runs) RUNS=$2; shift 2 ;; --epochs) EPOCHS=$2; shift 2 ;; *) exit 2 ;; esac
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
last_sps() { grep -o 'samples_per_sec=[0-9.]*' | tail -1 | cut -d= -f2; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

peak=$($PY - <<'PYEOF'
import time, torch
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
for _ in range(3): a @ b
torch.cuda.synchronize(); t = time.perf_counter(); n = 20
for _ in range(n): a @ b
torch.cuda.synchronize(); print(f"{2 * 8192**3 * n / (time.perf_counter() - t):.6g}")
PYEOF
)
# Forward + backward FLOPs per example: 3 GEMMs' worth per layer (forward, input and weight grads).
flops=$(( 6 * (784 * 512 + 512 * 256 + 256 * 10) ))
echo
echo "## GPU throughput: Sextant CUDA backend vs PyTorch $($PY -c 'import torch; print(torch.__version__)')"
echo
echo "FP32 GEMM peak measured with torch.mm (8192^3): $(awk -v p="$peak" 'BEGIN {printf "%.1f", p / 1e12}') TFLOP/s; $RUNS runs per cell, median of the last of $EPOCHS epochs."
echo
echo "| batch | Sextant samples/s | PyTorch samples/s | ratio | Sextant GEMM-peak fraction |"
echo "|---:|---:|---:|---:|---:|"
for batch in 128 4096; do
  s=(); t=()
  for ((r = 0; r < RUNS; ++r)); do
    s+=("$("$TRAIN" --gpus 1 --model mlp --dataset synthetic --train-subset 50000 --val-subset 1000 \
           --epochs "$EPOCHS" --batch-size "$batch" --hidden 512,256 --optimizer adam --lr 0.001 | last_sps)")
    t+=("$($PY "$HERE/torch_mlp.py" --device cuda --synthetic --epochs "$EPOCHS" --batch-size "$batch" | last_sps)")
  done
  ms=$(printf '%s\n' "${s[@]}" | median); mt=$(printf '%s\n' "${t[@]}" | median)
  awk -v b="$batch" -v s="$ms" -v t="$mt" -v f="$flops" -v p="$peak" \
    'BEGIN {printf "| %d | %.0f | %.0f | %.2fx | %.1f%% |\n", b, s, t, s / t, 100 * s * f / p}'
done
