// Replaced by the evaluation flow.
