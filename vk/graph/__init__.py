"""A small graph IR for ONNX models: import, passes, shape inference, NumPy execution and Vulkan plans."""
