// Replaced by the LLM policies.
