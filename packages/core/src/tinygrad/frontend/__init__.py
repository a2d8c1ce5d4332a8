"""The Tensor API, one mixin per family of ops; `tinygrad.tensor.Tensor` combines them."""
