"""The QMD tables and encoder: bit positions as open-gpu-doc's clcbc0qmd.h (V04_00) and clc6c0qmd.h (V03_00) give them
(transcribed here from the headers, independently of the generated tables), round trips, and clear errors."""
from __future__ import annotations

import os
import sys

import pytest
from tinygrad_backend_nv.qmd import QMD_BYTES, LaunchQMD, decode_launch, encode_launch, qmd_decode, qmd_encode, smem_config, version_for_class
from tinygrad_backend_nv.qmd_fields import QMD_FIELDS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from gen_qmd_fields import fields  # noqa: E402

# NVCBC0_QMDV04_00_* / NVC6C0_QMDV03_00_* MW(hi:lo), copied from the headers
GOLDEN = {
  "V04_00": {"QMD_TYPE": (25, 23), "RELEASE_ENABLE(0)": (320, 320), "RELEASE_STRUCTURE_SIZE(0)": (322, 321), "CONSTANT_BUFFER_VALID(0)": (416, 416),
             "CONSTANT_BUFFER_VALID(1)": (420, 420), "SHADER_LOCAL_MEMORY_HIGH_SIZE": (567, 544), "QMD_MINOR_VERSION": (579, 576),
             "QMD_MAJOR_VERSION": (583, 580), "SHARED_MEMORY_SIZE": (601, 584), "RELEASE_SEMAPHORE0_ADDR_LOWER": (671, 640),
             "RELEASE_SEMAPHORE0_PAYLOAD_LOWER": (735, 704), "GRID_WIDTH": (1055, 1024), "GRID_HEIGHT": (1071, 1056), "GRID_DEPTH": (1103, 1088),
             "CTA_THREAD_DIMENSION0": (1167, 1152), "REGISTER_COUNT": (1208, 1200), "BARRIER_COUNT": (1215, 1211),
             "PROGRAM_ADDRESS_LOWER": (1247, 1216), "PROGRAM_ADDRESS_UPPER": (1272, 1248), "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)": (1567, 1536),
             "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)": (1586, 1568), "CONSTANT_BUFFER_SIZE_SHIFTED4(0)": (1599, 1587),
             "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(1)": (1631, 1600)},
  "V03_00": {"CTA_RASTER_WIDTH": (415, 384), "QMD_VERSION": (579, 576), "QMD_MAJOR_VERSION": (583, 580), "CTA_THREAD_DIMENSION0": (607, 592),
             "CONSTANT_BUFFER_VALID(0)": (640, 640), "REGISTER_COUNT_V": (656, 648), "BARRIER_COUNT": (767, 763), "RELEASE0_ADDRESS_LOWER": (799, 768),
             "RELEASE0_ENABLE": (823, 823), "CONSTANT_BUFFER_ADDR_LOWER(0)": (1055, 1024), "CONSTANT_BUFFER_ADDR_LOWER(1)": (1119, 1088),
             "PROGRAM_ADDRESS_LOWER": (1567, 1536), "PROGRAM_ADDRESS_UPPER": (1584, 1568)},
}


@pytest.mark.parametrize("version", ["V03_00", "V04_00"])
def test_tables_match_the_headers(version: str) -> None:
  for name, bits in GOLDEN[version].items(): assert QMD_FIELDS[version][name] == bits, name


@pytest.mark.parametrize("version", ["V03_00", "V04_00"])
def test_each_field_lands_on_its_bits(version: str) -> None:
  for name, (hi, lo) in GOLDEN[version].items():
    value = int.from_bytes(qmd_encode(version, {name: (1 << (hi - lo + 1)) - 1}), "little")
    assert value == ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1), name


def test_generator_parses_plain_and_indexed_fields() -> None:
  text = ("#define NVCBC0_QMDV04_00_GRID_WIDTH                                 MW(1055:1024)\n"
          "#define NVCBC0_QMDV04_00_CONSTANT_BUFFER_VALID(i)                  MW((416+(i)*4):(416+(i)*4))\n"
          "#define NVCBC0_QMDV04_00_QMD_TYPE_GRID_CTA                         0x00000002\n")
  got = fields(text, "NVCBC0_QMDV04_00_")
  assert got["GRID_WIDTH"] == (1055, 1024) and got["CONSTANT_BUFFER_VALID(7)"] == (444, 444) and len(got) == 9


def test_round_trip_of_a_launch() -> None:
  q = LaunchQMD(program=0x10_0012_3400, grid=(3, 2, 5), block=(128, 2, 1), registers=32, barriers=1, shared=0x1400, local_high=0x250,
                cbufs={0: (0x10_0000_1040, 0x230), 4: (0x10_0200_0000, 0x10)}, release=(0x10_0000_2000, 7))
  for version in ("V03_00", "V04_00"):
    raw = encode_launch(version, q)
    assert len(raw) == QMD_BYTES[version] and decode_launch(version, raw) == q
  d = qmd_decode("V04_00", encode_launch("V04_00", q))
  assert d["QMD_MAJOR_VERSION"] == 4 and d["QMD_TYPE"] == 2 and d["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)"] == (0x10_0000_1040 >> 6) & 0xFFFFFFFF


def test_errors_name_the_field() -> None:
  with pytest.raises(ValueError, match="REGISTER_COUNT is 9 bits"): qmd_encode("V04_00", REGISTER_COUNT=512)
  with pytest.raises(KeyError, match="no field 'CTA_RASTER_WIDTH'"): qmd_encode("V04_00", CTA_RASTER_WIDTH=1)
  with pytest.raises(ValueError, match="64-byte aligned"):
    encode_launch("V04_00", LaunchQMD(program=0, grid=(1, 1, 1), block=(1, 1, 1), registers=8, barriers=0, shared=0, local_high=0, cbufs={0: (0x1010, 16)}))
  with pytest.raises(ValueError, match="not GRID_CTA"): decode_launch("V04_00", qmd_encode("V04_00", QMD_MAJOR_VERSION=4))
  with pytest.raises(ValueError, match="older than Ampere"): version_for_class(0xC5C0)
  assert qmd_encode("V04_00", CONSTANT_BUFFER_VALID__3=1) == qmd_encode("V04_00", {"CONSTANT_BUFFER_VALID(3)": 1})


def test_class_versions_and_shared_memory_configs() -> None:
  assert version_for_class(0xCBC0) == "V04_00" and version_for_class(0xC9C0) == "V03_00" and version_for_class(0xC6C0) == "V03_00"
  # min holds one block (a 17 KB block under an 8 KB minimum trapped on the H200); the target holds 2048 // threads blocks
  assert smem_config(90, 0) == (3, 58, 3) and smem_config(90, 228 * 1024) == (58, 58, 58)
  assert smem_config(90, 17408, threads=128) == (9, 58, 58)    # 32 KB at least; 16 blocks of 17 KB don't fit: the largest
  assert smem_config(90, 17408, threads=1024) == (9, 58, 17)   # two blocks: 34 KB -> 64 KB
  assert smem_config(90, 48 * 1024, threads=512) == (17, 58, 50)  # 4 blocks: 192 KB -> 196 KB and smem_config(90, 4096, threads=256) == (3, 58, 9)
  with pytest.raises(ValueError, match="at most 228 KB"): smem_config(90, 229 * 1024)
