"""The files a target places on a machine, with every value quoted for what reads it."""
