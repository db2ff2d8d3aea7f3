package main

// The guest kinds compiled into vfleet; each registers itself in init().
import _ "github.com/vfleet/vfleet/internal/guest/all"
