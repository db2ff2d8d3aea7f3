// The tc fast path: forwards IPv4 in the clsact ingress hook of the host
// ends of veths. Unlike XDP it works on skbs, so GSO super-packets and
// checksum offload survive, and bpf_redirect_peer hands the skb straight to
// the ingress of the far end of the egress veth, in its own namespace,
// skipping the host-side namespace's forwarding and the veth's backlog.

#include <linux/pkt_cls.h>

#include "fwd.h"

// The host ends of the veths the loader attached to (ifindex -> 1); only
// those have a peer that bpf_redirect_peer can land in.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} fp_veths SEC(".maps");

static __always_inline int fp_pass(enum fp_reason why)
{
	fp_count(why);
	return TC_ACT_OK;
}

SEC("tc")
int vfleet_tc_fwd(struct __sk_buff *skb)
{
	__u32 hlen = sizeof(struct ethhdr) + sizeof(struct iphdr);
	struct bpf_fib_lookup params;
	enum fp_reason why = FP_PASS_MALFORMED;
	struct bpf_redir_neigh nh;
	struct iphdr *iph;
	void *data, *data_end;
	long rc;

	// Headers of a veth skb are nearly always linear already; when not,
	// pull them in rather than give up on the packet.
	if ((void *)(long)skb->data + hlen > (void *)(long)skb->data_end)
		bpf_skb_pull_data(skb, hlen);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;

	iph = fp_parse(data, data_end, &why);
	if (!iph)
		return fp_pass(why);

	fp_fib_params(&params, iph, skb->ingress_ifindex, 0);
	rc = bpf_fib_lookup(skb, &params, sizeof(params), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return fp_pass(fp_fib_reason(rc));

	fp_forward(data, iph, &params);
	if (bpf_map_lookup_elem(&fp_veths, &params.ifindex)) {
		fp_count(FP_REDIRECTED);
		return bpf_redirect_peer(params.ifindex, 0);
	}
	// Any other device: let the kernel's neighbour code transmit it. The
	// lookup returned the next hop's address in ipv4_dst.
	__builtin_memset(&nh, 0, sizeof(nh));
	nh.nh_family = AF_INET;
	nh.ipv4_nh = params.ipv4_dst;
	rc = bpf_redirect_neigh(params.ifindex, &nh, sizeof(nh), 0);
	if (rc != TC_ACT_REDIRECT) {
		fp_count(FP_DROPPED);
		return TC_ACT_SHOT;
	}
	fp_count(FP_REDIRECTED_NEIGH);
	return TC_ACT_REDIRECT;
}

// bpf_fib_lookup and the redirect helpers are only for GPL-compatible
// programs.
char __license[] SEC("license") = "Dual MIT/GPL";
