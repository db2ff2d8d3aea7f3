package fastpath

// The objects and their loaders are committed, so building vfleet needs no
// clang; TestObjectsMatchSources fails when they drift from the C sources.
// The include path is where Debian keeps asm/types.h, which the uapi
// headers need. bpf/clang-version records the compiler, because another
// clang makes other, equally good instructions from the same sources.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel,bpfeb -cflags -I/usr/include/x86_64-linux-gnu xdp bpf/xdp_fwd.c
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel,bpfeb -cflags -I/usr/include/x86_64-linux-gnu tc bpf/tc_fwd.c
//go:generate sh -c "clang --version | sed -n 1p > bpf/clang-version"
