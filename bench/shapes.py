"""Sizes shared by our workloads and every peer (no imports: the peers run in other environments)."""
MATMUL_SIZES = (512, 1024, 2048, 4096)
N_16M = 16 * 1024 * 1024
REDUCE_2D = 4096  # sum over the rows of a REDUCE_2D x REDUCE_2D matrix; a vector times such a matrix (stored (K, N))
MLP = (128, 784, 512, 512, 10)  # batch, input, hidden, hidden, classes
CONV = (8, 64, 64, 56, 3)       # batch, cin, cout, height=width, kernel (padding 1)


def mlp_flops() -> int:
  bs, *sizes = MLP
  return 3 * 2 * bs * sum(i * o for i, o in zip(sizes, sizes[1:]))  # forward, and backward's two matmuls per layer
