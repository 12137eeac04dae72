// Replaced by the task loader.
