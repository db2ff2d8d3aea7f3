// Package metrics exposes what vfleet does in the Prometheus text format:
// the progress and latest values of the runs of this process (RunCollector,
// fed by the runner as its Observer), the usage of their live guests, and
// the contents of the results store (StoreCollector, for `vfleet serve`).
//
// Everything is read when Prometheus scrapes: a guest's CPU time and memory
// come from its cgroup (v1 or v2) or, for a guest without one, from /proc of
// its processes, and the store is queried per scrape. There is no polling
// loop, so an idle endpoint costs nothing. Files are parsed by pure
// functions tested on recorded files under testdata/.
//
// Lifecycle: create a collector, register it on a prometheus.Registry, and
// serve the registry with Listen; Close the server when the run ends.
package metrics
