#!/bin/bash
# A Slurm job array that makes one prompt list (default: the paper's main
# comparison on Self-Forcing with DensityKV) on 8 array tasks: task i runs
# shard i/8 (--shard env: the index from SLURM_ARRAY_TASK_ID − the array's
# first ID, the count from SLURM_ARRAY_TASK_COUNT). Every task writes into the
# one list folder on a shared file system; shards take disjoint prompts, a
# requeued task resumes its shard. Afterwards: densitykv collect "$OUT/NAME".
#
#   sbatch deploy/slurm/densitykv-array.sh                 # the defaults below
#   CONFIG=configs/paper/ablation/longlive/tau-3.yaml CHECKPOINT=models/longlive_base.pt \
#     LORA=models/longlive_lora.pt sbatch --array=0-3 deploy/slurm/densitykv-array.sh
#   DENSITYKV_ECHO=1 bash deploy/slurm/densitykv-array.sh  # print the command line only
#   bash deploy/slurm/densitykv-array.sh --dry-run         # the shard's prompts, nothing written
#
# Extra arguments are passed to densitykv generate.
#SBATCH --job-name=densitykv
#SBATCH --array=0-7
#SBATCH --cpus-per-task=16
#SBATCH --mem=40G
#SBATCH --time=7-00:00:00
#SBATCH --requeue
#SBATCH --output=densitykv-%A_%a.log
set -euo pipefail

: "${DENSITYKV:=densitykv}"
: "${CONFIG:=configs/paper/main/self-forcing/densitykv.yaml}"
: "${PROMPTS:=prompts/moviegen_refined_128.txt}"
: "${MODELS:=models}"
: "${CHECKPOINT:=$MODELS/self_forcing.pt}"
: "${TEXT_ENCODER:=$MODELS/Wan2.1-T2V-1.3B/models_t5_umt5-xxl-enc-bf16.pth}"
: "${TOKENIZER:=$MODELS/Wan2.1-T2V-1.3B/google/umt5-xxl}"
: "${VAE:=$MODELS/Wan2.1-T2V-1.3B/Wan2.1_VAE.pth}"
: "${OUT:=runs}"

if [[ -z "${SLURM_ARRAY_TASK_ID:-}" ]]; then
	echo "densitykv-array.sh: SLURM_ARRAY_TASK_ID is not set: submit with sbatch (an array job), or set it by hand" >&2
	exit 2
fi

args=(generate --config "$CONFIG" --prompts "$PROMPTS" --checkpoint "$CHECKPOINT"
	--text-encoder "$TEXT_ENCODER" --tokenizer "$TOKENIZER" --vae "$VAE"
	--out "$OUT" --shard env --quiet)
if [[ -n "${LORA:-}" ]]; then
	args+=(--lora "$LORA")
fi
args+=("$@")

if [[ -n "${DENSITYKV_ECHO:-}" ]]; then
	printf '%q ' "$DENSITYKV" "${args[@]}"
	printf '\n'
	exit 0
fi
exec "$DENSITYKV" "${args[@]}"
