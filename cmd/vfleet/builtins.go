package main

// The guest kinds and workloads compiled into vfleet; each registers itself
// in init().
import (
	_ "github.com/vfleet/vfleet/internal/guest/container"
	_ "github.com/vfleet/vfleet/internal/guest/host"
	_ "github.com/vfleet/vfleet/internal/guest/qemu"
)
