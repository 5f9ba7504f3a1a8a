"""helikon: agents as a pure state machine with swappable interpreters."""
