"""infertop's screens. Screens are imported where they are used (bench lazily)."""
