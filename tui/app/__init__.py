<<<<<<< HEAD
"""The Textual app (the only package that imports Textual)."""
=======
"""The Textual UI (the only package that imports Textual)."""
>>>>>>> main
