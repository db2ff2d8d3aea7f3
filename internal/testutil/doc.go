// Package testutil is the one place tests gate on privileges, build the
// agent, get the guest image, and check that nothing was left behind:
// mounts, runc containers, cgroups, child processes, network namespaces;
// and stands up another machine (RemoteMachine) for tests of a remote peer.
package testutil
