package testutil

import (
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestRemoteMachine reaches the fixture's sshd with its identity file and
// with its agent, checked against its known_hosts, and finds nothing left
// of it afterwards.
func TestRemoteMachine(t *testing.T) {
	RequiresRoot(t)
	before := TakeSnapshot(t)
	t.Run("machine", func(t *testing.T) {
		r := RemoteMachine(t)
		hostKeys, err := knownhosts.New(r.KnownHosts)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(r.Identity)
		if err != nil {
			t.Fatal(err)
		}
		key, err := ssh.ParsePrivateKey(raw)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("unix", r.AgentSocket)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for name, auth := range map[string]ssh.AuthMethod{
			"identity": ssh.PublicKeys(key),
			"agent":    ssh.PublicKeysCallback(agent.NewClient(conn).Signers),
		} {
			// known_hosts holds the ed25519 key, which the client must
			// ask for: it prefers the ECDSA one sshd also has.
			c, err := ssh.Dial("tcp", r.Addr.String(), &ssh.ClientConfig{User: r.User, Auth: []ssh.AuthMethod{auth}, HostKeyCallback: hostKeys,
				HostKeyAlgorithms: []string{r.HostKey.Type()}})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			// The session runs in the machine's own namespace, with its
			// work directory as TMPDIR and the dedicated NIC's far end.
			out, err := s.Output("echo $TMPDIR; grep -o " + r.NIC.PeerName + ": /proc/net/dev")
			c.Close()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := strings.Fields(string(out)); len(got) != 2 || got[0] != r.WorkDir || got[1] != r.NIC.PeerName+":" {
				t.Errorf("%s: session says %q, want TMPDIR %s and a link %s", name, out, r.WorkDir, r.NIC.PeerName)
			}
		}
		if _, err := net.InterfaceByName(r.NIC.Name); err != nil {
			t.Errorf("the dedicated NIC's end here: %v", err)
		}
	})
	CheckLeaks(t, before)
}
