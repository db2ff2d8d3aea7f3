package fastpath

import (
	"fmt"
	"sort"
	"strings"
)

// reasonNames names the entries of enum fp_reason in bpf/fwd.h, in its
// order: index i of the counters map counts reason reasonNames[i].
var reasonNames = []string{
	"redirected",
	"redirected_neigh",
	"dropped",
	"not_ipv4",
	"malformed",
	"fragment",
	"ttl_expiring",
	"fib_not_forwarded",
	"fib_no_neigh",
	"fib_frag_needed",
	"fib_forwarding_disabled",
	"fib_unreachable",
	"fib_other",
	"egress_not_ours",
}

// Indexes of the reasons that are not a pass to the stack.
const (
	reasonRedirected      = 0
	reasonRedirectedNeigh = 1
	reasonDropped         = 2
	firstPassReason       = 3
)

// Counters are the fast path's packet counts since Load, summed over CPUs.
type Counters struct {
	// Redirected packets were forwarded by the fast path itself.
	Redirected uint64
	// RedirectedNeigh is the part of Redirected that tc sent with
	// bpf_redirect_neigh, to a device that is not one of its veths.
	RedirectedNeigh uint64
	// Passed packets went on to the host-side namespace's stack.
	Passed uint64
	// Dropped packets were refused by the redirect helper.
	Dropped uint64
	// PassedByReason splits Passed by why the fast path did not forward
	// them; it has every reason, zero or not, so stored runs compare.
	PassedByReason map[string]uint64
}

// sumCounters adds up per-CPU counts: perCPU[reason][cpu].
func sumCounters(perCPU [][]uint64) (Counters, error) {
	if len(perCPU) != len(reasonNames) {
		return Counters{}, fmt.Errorf("counters map has %d entries, the program counts %d reasons", len(perCPU), len(reasonNames))
	}
	c := Counters{PassedByReason: make(map[string]uint64, len(reasonNames)-firstPassReason)}
	for i, cpus := range perCPU {
		var n uint64
		for _, v := range cpus {
			n += v
		}
		switch {
		case i == reasonRedirected:
			c.Redirected += n
		case i == reasonRedirectedNeigh:
			c.Redirected += n
			c.RedirectedNeigh += n
		case i == reasonDropped:
			c.Dropped += n
		default:
			c.Passed += n
			c.PassedByReason[reasonNames[i]] = n
		}
	}
	return c, nil
}

// Sub returns the counts that happened between an earlier reading and c.
func (c Counters) Sub(earlier Counters) Counters {
	d := Counters{
		Redirected:      c.Redirected - earlier.Redirected,
		RedirectedNeigh: c.RedirectedNeigh - earlier.RedirectedNeigh,
		Passed:          c.Passed - earlier.Passed,
		Dropped:         c.Dropped - earlier.Dropped,
		PassedByReason:  make(map[string]uint64, len(c.PassedByReason)),
	}
	for k, v := range c.PassedByReason {
		d.PassedByReason[k] = v - earlier.PassedByReason[k]
	}
	return d
}

// String is a one-line summary, nonzero pass reasons in name order.
func (c Counters) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redirected %d, passed %d, dropped %d", c.Redirected, c.Passed, c.Dropped)
	names := make([]string, 0, len(c.PassedByReason))
	for k, v := range c.PassedByReason {
		if v > 0 {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for i, k := range names {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s %d", sep, k, c.PassedByReason[k])
	}
	if len(names) > 0 {
		b.WriteString(")")
	}
	return b.String()
}
