package proc

import "bytes"

// lineWriter splits what a process writes into lines. exec.Cmd writes one
// stream from one goroutine, so it needs no lock.
type lineWriter struct {
	partial []byte
	line    func([]byte)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.partial = append(w.partial, b...)
			break
		}
		if len(w.partial) > 0 {
			w.partial = append(w.partial, b[:i]...)
			w.line(w.partial)
			w.partial = w.partial[:0]
		} else {
			w.line(b[:i])
		}
		b = b[i+1:]
	}
	return n, nil
}

// flush passes on a last line that had no newline.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.line(w.partial)
		w.partial = nil
	}
}
