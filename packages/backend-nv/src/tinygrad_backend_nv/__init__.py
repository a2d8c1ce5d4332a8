"""tinygrad NVIDIA backend: devices CUDA and NV, renderers CUDA (CUDA C via NVRTC) and PTX."""
