#!/usr/bin/env bash
# The precision run on the GPU benchmark machine (issue 36), in one command: the device and its cooperative
# matrices, the coopmat kernels against NumPy (fails loudly), the three models in fp32 and fp16 (and ncnn where
# its models travel), then whole-pipeline and agent figures per precision where asked. Brings up the machine as
# scripts/bench_remote.sh says (.gl/ loader debs, .whl/ wheels with vkocr's own, .bench/shared/compat):
# scripts/prepare_device.sh lays them out; carry .whl-run, .gl and .bench/shared, and start the command with
# `rm -rf .whl && mv .whl-run .whl &&`. `agent` needs the .whl-agent wheels too: install them in an earlier call
# to the same warm machine (`rm -rf .whl && mv .whl-agent .whl && source scripts/remote_setup.sh`).
# Usage: scripts/bench_precision.sh OUT_DIR [models] [coopmat] [stream] [agent] [sameness] (default: all)
set -uo pipefail
out="${1:-/tmp}"
shift || true
what="${*:-coopmat models stream agent sameness}"
# shellcheck source=scripts/remote_setup.sh
source scripts/remote_setup.sh
vkocr() { python3 -m vkocr.agent.cli.main "$@"; }
vkocr devices | tee "$out/devices.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv 2>/dev/null | tee -a "$out/devices.txt"
case "$what" in *coopmat*)
    python3 scripts/check_coopmat.py --json "$out/coopmat.json" | tee "$out/coopmat.txt"
    echo "check_coopmat exit ${PIPESTATUS[0]}" | tee -a "$out/coopmat.txt" ;;
esac
case "$what" in *models*)
    for set in ${MODEL_SETS:-ppocrv6-small}; do
        peers=""
        [ -d .peers ] && peers="--peers .peers"
        # shellcheck disable=SC2086
        vkocr bench models --models "$set" --precision fp32,fp16 --runs 30 $peers --json > "$out/models-$set.json"
        python3 -c "import json, sys; from vkocr.agent.cli.bench_models import format_model_results as f; print(f(json.load(open(sys.argv[1]))))" \
            "$out/models-$set.json" | tee "$out/models-$set.txt"
    done ;;
esac
c=.bench/shared/compat/rapidocr-1.4.4/images
case "$what" in *sameness*)
    python3 scripts/precision_sameness.py $c --rendered 96 --json "$out/sameness.json" | tee "$out/sameness.txt" ;;
esac
case "$what" in *stream*)
    vkocr bench stream $c --rendered 96 --precision fp32 --json "$out/stream-fp32.json" | tee "$out/stream-fp32.txt"
    vkocr bench stream $c --rendered 96 --precision fp16 --no-rapidocr --json "$out/stream-fp16.json" \
        | tee "$out/stream-fp16.txt" ;;
esac
case "$what" in *agent*)
    # three passes over the 106 images per level: a level of one pass lasts about a second on an H100, and its
    # first and last requests' ramp read ~20 % below the steady rate (benchmarks/2026-12-06-h100-agent-*-session30.json)
    for p in fp32 fp16; do
        vkocr bench agent $c --rendered 96 --clients 1,4,16,64 --modes unary --raw --runs default \
            --precision "$p" --passes "${AGENT_PASSES:-3}" --json > "$out/agent-raw-$p.json"
        python3 -c "import json, sys; from vkocr.agent.cli.bench_agent_report import format_agent_results as f; print(f(json.load(open(sys.argv[1]))))" \
            "$out/agent-raw-$p.json" | tee "$out/agent-raw-$p.txt"
    done ;;
esac
# The benchmark machine hands back at most 8 files from $OUT: when writing there, everything above goes into one
# results.tgz (tar xzf it here).
if [ -n "${OUT:-}" ] && [ "$out" = "$OUT" ]; then
    (cd "$out" && tar czf results.tgz --remove-files -- *.json *.txt 2>/dev/null)
fi
