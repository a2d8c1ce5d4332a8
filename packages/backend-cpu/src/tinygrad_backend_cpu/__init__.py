"""tinygrad's CPU backend: renderers CLANG (C) and LLVM (LLVM IR), one in-process runtime."""
