"""The clock games' gate (Speed Hex, Speed Go): a recurrent policy over both clocks."""
