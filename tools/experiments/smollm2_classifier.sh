#!/bin/sh
# make smollm2-classifier: data/smollm2/classifier.json, C2T's classifier for
# the shipped SmolLM2 EAGLE head (data/smollm2/eagle), from the collection
# prompts data/smollm2/prompts/collect.jsonl (tools/experiments/classifier.sh).
# Sizes: Q (60), MAX_NEW (64), BATCH (8).  About 26 min on 2 cores.
cd "$(dirname "$0")/../.." || exit 1
NAME=smollm2-classifier T=models/smollm2-135m-instruct DRAFT=data/smollm2/eagle KIND=eagle \
PROMPTS=data/smollm2/prompts/collect.jsonl R=results/smollm2-classifier OUT=${OUT:-data/smollm2/classifier.json} \
Q=${Q:-60} MAX_NEW=${MAX_NEW:-64} BATCH=${BATCH:-8} exec tools/experiments/classifier.sh
