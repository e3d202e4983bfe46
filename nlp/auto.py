"""Auto classes: resolve a name through the hub, then load from a directory."""
