"""Property-based fuzzing of every entry point with bad input."""
