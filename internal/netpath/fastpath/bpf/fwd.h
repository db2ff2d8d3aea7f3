// Parsing, route lookup and counters shared by the XDP and the TC fast
// paths. Both run in the host-side namespace on the host ends of the veths,
// so bpf_fib_lookup consults the very routes and neighbours that IP
// forwarding there would use: the fast path only ever takes a decision the
// stack would have taken, and leaves every other packet to the stack.

#ifndef VFLEET_FWD_H
#define VFLEET_FWD_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif

// Not in the uapi headers: the fragment bits of iphdr.frag_off.
#define FP_IP_MF 0x2000
#define FP_IP_OFFSET 0x1fff

// Why a packet went where it went: the index into fp_counters. The Go side
// names these in reasonNames, in this order; a unit test reads this enum
// from this file and compares, so add new reasons at the end of both.
enum fp_reason {
	FP_REDIRECTED = 0,        // sent on by the fast path (XDP devmap, TC peer)
	FP_REDIRECTED_NEIGH,      // TC only: sent on with bpf_redirect_neigh
	FP_DROPPED,               // the redirect helper refused; packet aborted
	FP_PASS_NOT_IPV4,         // ARP, IPv6, anything but IPv4 over Ethernet
	FP_PASS_MALFORMED,        // truncated headers or a bad IHL
	FP_PASS_FRAGMENT,         // IPv4 fragments: reassembly is the stack's job
	FP_PASS_TTL,              // TTL <= 1: the stack sends the ICMP error
	FP_PASS_FIB_NOT_FWDED,    // destination is local, broadcast or multicast
	FP_PASS_FIB_NO_NEIGH,     // next hop not resolved yet: the stack ARPs
	FP_PASS_FIB_FRAG_NEEDED,  // bigger than the egress MTU
	FP_PASS_FIB_FWD_DISABLED, // forwarding is off on the ingress device
	FP_PASS_FIB_UNREACHABLE,  // blackhole, unreachable or prohibit route
	FP_PASS_FIB_OTHER,        // any other lookup result, present or future
	FP_PASS_NOT_OURS,         // egress device is not one the fast path owns
	FP_REASON_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_REASON_MAX);
	__type(key, __u32);
	__type(value, __u64);
} fp_counters SEC(".maps");

static __always_inline void fp_count(enum fp_reason reason)
{
	__u32 key = reason;
	__u64 *n = bpf_map_lookup_elem(&fp_counters, &key);

	// Per-CPU slots: no other CPU writes this one, no atomics needed.
	if (n)
		*n += 1;
}

// fp_parse checks the Ethernet and IPv4 headers in [data, data_end) and
// returns the IPv4 header, or NULL with *why saying why the packet must go
// to the stack.
static __always_inline struct iphdr *fp_parse(void *data, void *data_end, enum fp_reason *why)
{
	struct ethhdr *eth = data;
	struct iphdr *iph;

	if ((void *)(eth + 1) > data_end) {
		*why = FP_PASS_MALFORMED;
		return NULL;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP)) {
		*why = FP_PASS_NOT_IPV4;
		return NULL;
	}
	iph = (void *)(eth + 1);
	if ((void *)(iph + 1) > data_end) {
		*why = FP_PASS_MALFORMED;
		return NULL;
	}
	if (iph->version != 4 || iph->ihl < 5) {
		*why = FP_PASS_MALFORMED;
		return NULL;
	}
	if (iph->frag_off & bpf_htons(FP_IP_MF | FP_IP_OFFSET)) {
		*why = FP_PASS_FRAGMENT;
		return NULL;
	}
	if (iph->ttl <= 1) {
		*why = FP_PASS_TTL;
		return NULL;
	}
	return iph;
}

// fp_fib fills params for an IPv4 lookup of iph arriving on ifindex.
// tot_len 0 asks the skb variant of the helper to check the MTU itself,
// which understands GSO packets; XDP frames are never GSO, so XDP passes the
// header's length.
static __always_inline void fp_fib_params(struct bpf_fib_lookup *params, struct iphdr *iph,
					  __u32 ifindex, __u16 tot_len)
{
	__builtin_memset(params, 0, sizeof(*params));
	params->family = AF_INET;
	params->tos = iph->tos;
	params->l4_protocol = iph->protocol;
	params->tot_len = tot_len;
	params->ipv4_src = iph->saddr;
	params->ipv4_dst = iph->daddr;
	params->ifindex = ifindex;
}

// fp_fib_reason maps a lookup result other than success to its reason.
static __always_inline enum fp_reason fp_fib_reason(long rc)
{
	switch (rc) {
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		return FP_PASS_FIB_NOT_FWDED;
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return FP_PASS_FIB_NO_NEIGH;
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:
		return FP_PASS_FIB_FRAG_NEEDED;
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
		return FP_PASS_FIB_FWD_DISABLED;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		return FP_PASS_FIB_UNREACHABLE;
	default:
		return FP_PASS_FIB_OTHER;
	}
}

// fp_forward does to the headers what IP forwarding would: one hop less,
// with the checksum updated incrementally (RFC 1624: the TTL is the high
// byte of a 16-bit word, so the sum grows by 0x0100 in network order), and
// the MAC addresses of the next hop.
static __always_inline void fp_forward(struct ethhdr *eth, struct iphdr *iph,
				       const struct bpf_fib_lookup *params)
{
	__u32 check = (__u32)iph->check;

	check += (__u32)bpf_htons(0x0100);
	iph->check = (__sum16)(check + (check >= 0xffff));
	iph->ttl--;
	__builtin_memcpy(eth->h_dest, params->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, params->smac, ETH_ALEN);
}

#endif
