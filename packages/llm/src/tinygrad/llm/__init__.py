"""tinygrad.llm: GGUF language models (llama, qwen2, qwen3, qwen3moe) in the terminal, over an OpenAI-compatible API, and in a browser."""
