package agent

import "bytes"

// cutBuffer holds one output stream of an execution within limit bytes.
// Past the limit it keeps the output's beginning (a quarter of the room)
// and its end (the rest): a tool's header and its closing summary, where
// metrics usually are, both survive a runaway log in between.
type cutBuffer struct {
	head     []byte
	headRoom int
	tail     ring
	total    int64
}

func newCutBuffer(limit int) *cutBuffer {
	headRoom := limit / 4
	return &cutBuffer{headRoom: headRoom, tail: ring{size: limit - headRoom}}
}

func (b *cutBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	take := min(b.headRoom-len(b.head), len(p))
	b.head = append(b.head, p[:take]...)
	b.tail.write(p[take:])
	return len(p), nil
}

// result is what the reply carries, and where the middle was dropped (nil
// when the whole output was kept). A cut output keeps whole lines only:
// a line broken at the cut could still match a metric's pattern and give
// a number that lost its leading digits. Where a side has no newline at
// all (one huge line, binary output) it is kept as it is.
func (b *cutBuffer) result() ([]byte, *Cut) {
	tail := b.tail.bytes()
	if b.total <= int64(b.headRoom+b.tail.size) {
		return append(b.head, tail...), nil
	}
	head := b.head
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[:i+1]
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i+1 < len(tail) {
		tail = tail[i+1:]
	}
	kept := int64(len(head) + len(tail))
	return append(head, tail...), &Cut{At: int64(len(head)), Dropped: b.total - kept, Total: b.total}
}

// ring keeps the last size bytes written to it.
type ring struct {
	buf  []byte // grows up to size, then is overwritten from next on
	size int
	next int // where the oldest byte is, once buf is full
}

func (r *ring) write(p []byte) {
	if len(p) > r.size {
		p = p[len(p)-r.size:]
	}
	if room := r.size - len(r.buf); room > 0 {
		n := min(room, len(p))
		r.buf = append(r.buf, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(r.buf[r.next:], p)
		p = p[n:]
		r.next = (r.next + n) % r.size
	}
}

// bytes is what the ring holds, oldest first.
func (r *ring) bytes() []byte {
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
