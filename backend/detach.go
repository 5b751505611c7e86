package backend

import "io"

// Detachable wraps a response body stream the gateway makes itself (the
// MCP gateway's event streams) so that a response policy can take it off
// its response and read it (policy.TakeBodyStream), as it can a backend's
// streamed body.
func Detachable(r io.ReadCloser) io.ReadCloser { return &detachable{r: r} }

type detachable struct {
	r        io.ReadCloser
	keepOnce bool
}

func (d *detachable) Read(p []byte) (int, error) { return d.r.Read(p) }

// Detach makes the next Close do nothing.
func (d *detachable) Detach() { d.keepOnce = true }

func (d *detachable) Close() error {
	if d.keepOnce {
		d.keepOnce = false
		return nil
	}
	return d.r.Close()
}
