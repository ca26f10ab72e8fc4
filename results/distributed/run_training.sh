#!/bin/sh
# The ResNet-20 on Fashion-MNIST trained on 2 processes (gloo) with gradients sent in each format,
# one CSV per (format, seed) here; docs/distributed.md tabulates them. Usage, from the repository
# root with the package built: PYTHONPATH=build/release/python results/distributed/run_training.sh "0 1 2"
set -e
seeds=${1:-0}
limit=${TRAIN_LIMIT:-4000}
out=$(dirname "$0")
for seed in $seeds; do
  for config in "fp32:" "bf16:--comm-format bf16" "e4m3:--comm-format e4m3" \
                "e4m3-sr:--comm-format e4m3 --comm-rounding stochastic" \
                "e4m3-sr-ef:--comm-format e4m3 --comm-rounding stochastic --comm-error-feedback" \
                "e4m3-ef:--comm-format e4m3 --comm-error-feedback" \
                "mxfp8:--comm-format mxfp8-e4m3" "mxfp4:--comm-format mxfp4"; do
    name=${config%%:*}
    flags=${config#*:}
    torchrun --nproc_per_node 2 examples/torch/train.py --model resnet20 --epochs 1 --train-limit "$limit" \
      --test-limit 2000 --seed "$seed" --threads 1 $flags --csv "$out/train_${name}_seed${seed}.csv" 2>/dev/null
  done
done
