"""agentx: an open benchmark for LLM inference on agentic traffic."""

__version__ = "0.1.0"
