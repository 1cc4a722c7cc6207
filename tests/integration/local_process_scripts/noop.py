"""Does nothing: for tests about what happens around a script."""
