"""tinygrad-backend-amd: AMD GPUs (RDNA3/4, CDNA3/4) for tinygrad, registered through tinygrad.device.plugin."""
