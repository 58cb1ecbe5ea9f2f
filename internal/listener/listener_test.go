package listener

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestAbandonedBodyLingers: a request whose body the server abandons
// (AbandonBody: a body over the size limit) is answered, and the close
// after the answer lingers, so the client, still sending its body, reads
// the answer and then EOF, not a reset. (make test-stress: the deadline
// AbandonBody sets was taken for the client running out of time, the
// close did not linger, and TestPayloadSizeLimit's client got "connection
// reset by peer" for its 1 MiB body.)
func TestAbandonedBodyLingers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, Config{RequestTimeout: 10 * time.Second})
	defer l.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	go func() { // the client sends its whole body whatever happens
		client.Write([]byte("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n"))
		client.Write(make([]byte, 4<<20))
	}()
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*Conn)
	if _, err := io.ReadFull(c, make([]byte, 1024)); err != nil {
		t.Fatalf("read the request's start: %v", err)
	}
	c.AbandonBody()
	if _, err := c.Read(make([]byte, 1024)); err == nil {
		t.Fatal("a read after AbandonBody succeeded")
	}
	const answer = "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
	if _, err := c.Write([]byte(answer)); err != nil {
		t.Fatalf("write the answer: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Read only now, after the server's close: a reset would have
	// destroyed the answer in the client's receive buffer by now.
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil || string(got) != answer {
		t.Fatalf("the client read %q, %v; want the answer, then EOF", got, err)
	}
}
