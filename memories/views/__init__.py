"""The memories part of the internal JSON API, one module per flow. Views parse, call one service or selector, present."""
