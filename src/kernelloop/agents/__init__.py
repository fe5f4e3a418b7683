"""The four agents' logic, independent of LangGraph: what each one asks of the tools and
turns into the next step's input (the graph's nodes call these)."""
