package hostinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// NIC is what a run records of a network interface it measures across:
// its driver and firmware, which move results as much as a kernel does,
// and the offloads it had on.
type NIC struct {
	Name     string `json:"name"`
	Driver   string `json:"driver"`
	Version  string `json:"driver_version,omitempty"`
	Firmware string `json:"firmware,omitempty"`
	// Offloads maps each top-level feature `ethtool -k` lists to "on" or
	// "off", with " [fixed]" when the driver does not let it change.
	Offloads map[string]string `json:"offloads,omitempty"`
}

// DescribeNIC describes the NIC name from `ethtool -i` and `ethtool -k`,
// run by ethtool where the NIC is: on this host, or on a peer over SSH.
func DescribeNIC(name string, ethtool func(args ...string) ([]byte, error)) (*NIC, error) {
	out, err := ethtool("-i", name)
	if err != nil {
		return nil, err
	}
	n, err := ParseEthtoolDriver(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("ethtool -i %s: %w", name, err)
	}
	if out, err = ethtool("-k", name); err != nil {
		return nil, err
	}
	if n.Offloads, err = ParseEthtoolFeatures(bytes.NewReader(out)); err != nil {
		return nil, fmt.Errorf("ethtool -k %s: %w", name, err)
	}
	n.Name = name
	return &n, nil
}

// ParseEthtoolDriver reads `ethtool -i`: driver, its version and the
// firmware's.
func ParseEthtoolDriver(r io.Reader) (NIC, error) {
	var n NIC
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "driver":
			n.Driver = val
		case "version":
			n.Version = val
		case "firmware-version":
			n.Firmware = val
		}
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	if n.Driver == "" {
		return n, errors.New("no driver line")
	}
	return n, nil
}

// ParseEthtoolFeatures reads `ethtool -k`: the top-level features (the
// indented ones are their parts, which the top level sums up).
func ParseEthtoolFeatures(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "Features for ") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		out[key] = strings.TrimSpace(val)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no features")
	}
	return out, nil
}
