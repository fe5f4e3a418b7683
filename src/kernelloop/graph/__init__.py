"""The agent loop as a LangGraph state machine: profiler -> researcher -> optimizer -> verifier."""
