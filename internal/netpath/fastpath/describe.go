package fastpath

import "fmt"

// describe is Describe without the lock, fed plain data so that its format
// is tested without a kernel. Keys:
//
//	mode                   xdp or tc
//	program.<name>         kernel id and tag of each loaded program
//	if.<host>              how the host end <host> is hooked
//	if.<host>.offload      its offload settings after Attach
//	if.<host>.changed      what Attach and the kernel changed on it
//	if.<host>.far          the far end: its name and how it is hooked
//	if.<host>.far.offload  and so on for the far end
//	if.<host>.far.changed
//	if.<nic>.sent_by       a NIC's: how frames from the guests reach it
//
// "changed" is only present when something changed. A tap's far end is a
// VM's NIC, a NIC's another machine's, which the Set does not touch:
// if.<host>.far says so, and has no offloads.
func describe(mode Mode, progs []progDesc, ifaces []*iface) map[string]string {
	d := map[string]string{"mode": string(mode)}
	for _, p := range progs {
		d["program."+p.name] = fmt.Sprintf("id %d, tag %s", p.id, p.tag)
	}
	for _, ifc := range ifaces {
		key := "if." + ifc.name
		if ifc.far {
			key = "if." + ifc.peer.name + ".far"
		}
		hook := ifc.hook
		if ifc.progName != "" {
			hook += ", program " + ifc.progName
		}
		var ns uint64
		if ifc.sp != nil {
			ns = ifc.sp.key.ino
		}
		where := fmt.Sprintf("ifindex %d, netns inode %d", ifc.index, ns)
		if ifc.far {
			d[key] = fmt.Sprintf("%s: %s, %s", ifc.name, hook, where)
		} else {
			d[key] = fmt.Sprintf("%s, %s", hook, where)
		}
		d[key+".offload"] = ifc.after.String()
		if ch := ifc.after.changes(ifc.before); ch != "" {
			d[key+".changed"] = ch
		}
		switch {
		case ifc.tap:
			d[key+".far"] = "none: a tap, whose far end is a VM's NIC in its emulator"
		case ifc.nic:
			d[key+".far"] = "none: a NIC, whose far end is another machine's"
			d[key+".sent_by"] = ifc.sendsTo
		}
	}
	return d
}
