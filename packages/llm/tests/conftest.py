import pytest
from live_server import chat_model


@pytest.fixture(scope="session")
def chat_llm(tmp_path_factory):
  """One tiny chat model for every live-server test of the session (loading and warming it is the slow part)."""
  return chat_model(tmp_path_factory.mktemp("chat"))
