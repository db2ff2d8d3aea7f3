package vminit

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ParamNet carries the guest's network interface when it has one:
// ADDR/PREFIX,GATEWAY,MAC, the gateway empty on a switched path.
const ParamNet = "vfleet.net"

// NetConfig is how the guest's init configures its NIC.
type NetConfig struct {
	Addr    netip.Prefix
	Gateway netip.Addr // invalid: no default route
	MAC     net.HardwareAddr
}

// String is the value of ParamNet.
func (c NetConfig) String() string {
	gw := ""
	if c.Gateway.IsValid() {
		gw = c.Gateway.String()
	}
	return c.Addr.String() + "," + gw + "," + c.MAC.String()
}

// Check reports what makes the configuration unusable.
func (c NetConfig) Check() error {
	if !c.Addr.IsValid() || !c.Addr.Addr().Is4() || c.Addr.Bits() == 0 {
		return fmt.Errorf("address %s is not an IPv4 address with a prefix length", c.Addr)
	}
	if c.Gateway.IsValid() {
		if !c.Gateway.Is4() {
			return fmt.Errorf("gateway %s is not an IPv4 address", c.Gateway)
		}
		if !c.Addr.Masked().Contains(c.Gateway) || c.Gateway == c.Addr.Addr() {
			return fmt.Errorf("gateway %s is not another address of %s", c.Gateway, c.Addr.Masked())
		}
	}
	if len(c.MAC) != 6 {
		return fmt.Errorf("MAC %q is not an Ethernet address", c.MAC.String())
	}
	return nil
}

// ParseNetConfig reads the value of ParamNet.
func ParseNetConfig(s string) (NetConfig, error) {
	bad := func(err error) (NetConfig, error) {
		return NetConfig{}, fmt.Errorf("%s=%s: %w (want ADDR/PREFIX,GATEWAY,MAC with the gateway possibly empty)", ParamNet, s, err)
	}
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return bad(fmt.Errorf("%d fields", len(f)))
	}
	var c NetConfig
	var err error
	if c.Addr, err = netip.ParsePrefix(f[0]); err != nil {
		return bad(err)
	}
	if f[1] != "" {
		if c.Gateway, err = netip.ParseAddr(f[1]); err != nil {
			return bad(err)
		}
	}
	if c.MAC, err = net.ParseMAC(f[2]); err != nil {
		return bad(err)
	}
	if err := c.Check(); err != nil {
		return bad(err)
	}
	return c, nil
}
