"""tinygrad Qualcomm backend: the QCOMCL renderer (OpenCL C for Adreno) and the CL device (any OpenCL platform)."""
