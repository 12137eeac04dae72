// Replaced by the engine.
