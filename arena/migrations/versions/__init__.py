"""The arena's schema revisions, oldest first; a released one is never edited."""
