"""The committed games' gate (Pac-Man, Snake, Tetris): it picks each option's budget k."""
