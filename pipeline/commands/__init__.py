"""The user commands over the library: init, doctor, pin, compare, smoke, verify (the CLI calls these)."""
