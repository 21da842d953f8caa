"""Backend selection over fabricated device lists (DeviceInfo values built here, no driver involved): the
ranking, CPU implementations of Vulkan only by name, the quirks table, named overrides, no device at all."""

from __future__ import annotations

import pytest

from vkocr.engine.devices import DeviceInfo, MemoryHeap, choose
from vkocr.engine.errors import DeviceNotFound
from vkocr.engine.quirks import Quirk

NVIDIA, INTEL, MESA = 0x10DE, 0x8086, 0x10005


def device(index: int, name: str, type: str, *, vendor_id: int = NVIDIA, device_id: int = 0x2335,
           driver: str = "550.54.14", mib: int = 8192) -> DeviceInfo:
    return DeviceInfo(
        index=index, name=name, type=type, vendor=f"0x{vendor_id:04x}", vendor_id=vendor_id, device_id=device_id,
        driver_name="", driver_info="", driver_version=driver, driver_version_raw=0, api_version="1.3.0",
        uuid=f"{index:08x}-0000-0000-0000-000000000000", pipeline_cache_uuid="", memory_heaps=(
            MemoryHeap(mib, True),), subgroup_size=32, fp16_storage=True, fp16_arithmetic=True,
        int8_storage=True, int8_arithmetic=True, max_workgroup_size=(1024, 1024, 64),
        max_workgroup_invocations=1024, max_workgroup_count=(65535, 65535, 65535), max_shared_memory_bytes=49152,
        max_push_constants_bytes=256, max_storage_buffer_range=1 << 31, min_storage_buffer_offset_alignment=16,
        non_coherent_atom_size=64, timestamp_period_ns=1.0, timestamps_supported=True, extensions=frozenset())


LAVAPIPE = device(0, "llvmpipe (LLVM 15.0.6, 256 bits)", "cpu", vendor_id=MESA, device_id=0, driver="0.0.1")
SWIFTSHADER = device(1, "SwiftShader Device (Subzero)", "other", vendor_id=0x1AE0, device_id=0xC0DE)
INTEGRATED = device(2, "Intel(R) UHD Graphics 770", "integrated", vendor_id=INTEL, device_id=0x4680,
                    driver="23.2.1", mib=4096)
DISCRETE = device(3, "NVIDIA H200", "discrete")
VIRTUAL = device(4, "Virtio-GPU Venus", "virtual", vendor_id=0x1AF4, device_id=0x1050, driver="24.0.0")


@pytest.fixture(autouse=True)
def no_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VKOCR_DEVICE", raising=False)


def test_discrete_beats_integrated_beats_virtual_and_lavapipe_is_never_ranked() -> None:
    choice = choose([LAVAPIPE, VIRTUAL, INTEGRATED, DISCRETE])
    assert choice.device == DISCRETE and "discrete" in choice.reason and not choice.falls_back
    assert choose([LAVAPIPE, VIRTUAL, INTEGRATED]).device == INTEGRATED
    assert choose([LAVAPIPE, VIRTUAL]).device == VIRTUAL


def test_more_device_memory_wins_within_a_type() -> None:
    small, big = device(0, "GPU A", "discrete", mib=8192), device(1, "GPU B", "discrete", mib=81920)
    assert choose([small, big]).device == big


def test_only_cpu_implementations_fall_back_to_the_cpu_backend() -> None:
    choice = choose([LAVAPIPE, SWIFTSHADER])  # SwiftShader says "other": its name decides
    assert choice.device is None and choice.falls_back
    assert choice.reason.startswith("only CPU implementations of Vulkan")
    assert "llvmpipe" in choice.reason and "SwiftShader" in choice.reason
    assert [a.usable for a in choice.assessments] == [False, False]


def test_no_device_at_all_falls_back() -> None:
    choice = choose([])
    assert choice.device is None and choice.reason == "no Vulkan device found" and choice.assessments == ()


def test_a_denying_quirk_skips_the_device_in_its_driver_range_only() -> None:
    quirks = [Quirk(NVIDIA, "test: wrong results", device_id=0x2335, first="550.0", fixed="550.90",
                    deny="miscompiles conv2d")]
    choice = choose([INTEGRATED, DISCRETE], quirks=quirks)
    assert choice.device == INTEGRATED
    assert choice.assessments[1].unusable_because == "denied by a quirk: miscompiles conv2d"
    fixed_driver = device(3, "NVIDIA H200", "discrete", driver="550.90.7")
    assert choose([INTEGRATED, fixed_driver], quirks=quirks).device == fixed_driver
    other_device = device(3, "NVIDIA L4", "discrete", device_id=0x27B8)
    assert choose([INTEGRATED, other_device], quirks=quirks).device == other_device


def test_every_gpu_denied_falls_back_and_says_which_quirk() -> None:
    quirks = [Quirk(NVIDIA, "test", name_pattern=r"h200", deny="hangs on submit"),
              Quirk(INTEL, "test", deny="no compute queue that works")]
    choice = choose([DISCRETE, INTEGRATED], quirks=quirks)
    assert choice.device is None
    assert choice.reason.startswith("every Vulkan GPU is denied by the quirks table")
    assert "hangs on submit" in choice.reason and "no compute queue that works" in choice.reason
    mixed = choose([LAVAPIPE, DISCRETE], quirks=quirks)
    assert mixed.device is None and mixed.reason.startswith("no usable Vulkan GPU")


def test_a_workaround_quirk_keeps_the_device_and_carries_its_flag() -> None:
    quirks = [Quirk(INTEL, "test", name_pattern="uhd", workaround="small_workgroups")]
    choice = choose([INTEGRATED], quirks=quirks)
    assert choice.device == INTEGRATED and choice.workarounds == frozenset({"small_workgroups"})


def test_a_quirk_sets_exactly_one_effect() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Quirk(NVIDIA, "test")
    with pytest.raises(ValueError, match="exactly one"):
        Quirk(NVIDIA, "test", deny="x", workaround="y")


def test_naming_takes_lavapipe_and_denied_devices() -> None:
    devices = [LAVAPIPE, INTEGRATED, DISCRETE]
    named = choose(devices, "llvmpipe")
    assert named.device == LAVAPIPE and "matched by name" in named.reason
    assert "not chosen automatically: a CPU implementation of Vulkan" in named.reason
    assert choose(devices, "0").device == LAVAPIPE
    assert choose(devices, LAVAPIPE.uuid).device == LAVAPIPE
    quirks = [Quirk(NVIDIA, "test", deny="hangs on submit")]
    denied = choose(devices, "h200", quirks=quirks)
    assert denied.device == DISCRETE and "hangs on submit" in denied.reason


def test_the_environment_names_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VKOCR_DEVICE", "llvmpipe")
    choice = choose([LAVAPIPE, DISCRETE])
    assert choice.device == LAVAPIPE and choice.reason.startswith("VKOCR_DEVICE='llvmpipe'")


def test_a_name_that_matches_nothing_is_an_error_listing_the_devices() -> None:
    with pytest.raises(DeviceNotFound, match="matches no Vulkan device.*llvmpipe"):
        choose([LAVAPIPE], "radeon")
    with pytest.raises(DeviceNotFound, match="devices are: none"):
        choose([], "0")


def test_backend_names_come_before_vulkan_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from vkocr.agent.ocr.backend_choice import choose_backend

    assert (choose_backend("cpu").kind, choose_backend("numpy").kind) == ("cpu", "numpy")
    assert not choose_backend("cpu").fallback
    monkeypatch.setenv("VKOCR_DEVICE", "numpy")
    choice = choose_backend()
    assert choice.kind == "numpy" and choice.reason.startswith("VKOCR_DEVICE='numpy'")
