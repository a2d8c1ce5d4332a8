"""Devices: the DEV grammar, the plugin registry, and device instances (`Device["CPU"]`)."""
from tinygrad.device.registry import Device, DeviceNotFound, registry
from tinygrad.device.runtime import Allocator, Buffer, Compiled

__all__ = ["Device", "DeviceNotFound", "registry", "Allocator", "Buffer", "Compiled"]
