// The xdp fast path: forwards IPv4 between the host ends of veths in the
// driver's XDP hook, before any skb exists.
//
// Caveats the loader handles, documented here because they come from how
// veths treat XDP:
//   - A frame redirected into a veth is delivered by the far end's NAPI,
//     which only runs when the far end has an XDP program (or GRO) enabled;
//     the loader attaches vfleet_xdp_pass there.
//   - While an XDP program sits on a veth, the kernel takes TSO away from
//     its peer (and TX checksumming off does too), so senders segment in
//     software and hand over MTU-sized packets: this path never sees 64 KiB
//     super-packets, which costs throughput on bulk TCP.
//   - An XDP frame carries no checksum state. A sender with TX checksum
//     offload on leaves a partial checksum, which stays partial once the
//     frame is redirected, and the receiver drops the segment as corrupt.
//     The loader turns TX checksumming off on the senders.

#include "fwd.h"

// Egress devices the fast path may redirect to, keyed by ifindex. A hash
// rather than an array, because ifindexes of links moved between
// namespaces are not small.
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} fp_egress SEC(".maps");

static __always_inline int fp_pass(enum fp_reason why)
{
	fp_count(why);
	return XDP_PASS;
}

SEC("xdp")
int vfleet_xdp_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup params;
	enum fp_reason why = FP_PASS_MALFORMED;
	struct iphdr *iph;
	long rc;

	iph = fp_parse(data, data_end, &why);
	if (!iph)
		return fp_pass(why);

	fp_fib_params(&params, iph, ctx->ingress_ifindex, bpf_ntohs(iph->tot_len));
	rc = bpf_fib_lookup(ctx, &params, sizeof(params), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return fp_pass(fp_fib_reason(rc));

	// Check before touching the packet: once the headers are rewritten it
	// could no longer go to the stack unchanged.
	if (!bpf_map_lookup_elem(&fp_egress, &params.ifindex))
		return fp_pass(FP_PASS_NOT_OURS);

	fp_forward(data, iph, &params);
	rc = bpf_redirect_map(&fp_egress, params.ifindex, 0);
	if (rc != XDP_REDIRECT) {
		fp_count(FP_DROPPED);
		return XDP_ABORTED;
	}
	fp_count(FP_REDIRECTED);
	return XDP_REDIRECT;
}

// Attached to the far ends of the veths so that their NAPI runs and frames
// redirected into the pair are delivered (see the top of this file).
SEC("xdp")
int vfleet_xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

// bpf_fib_lookup and the redirect helpers are only for GPL-compatible
// programs.
char __license[] SEC("license") = "Dual MIT/GPL";
