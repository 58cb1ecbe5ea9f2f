package stack_test

import (
	"fmt"
	"testing"

	"github.com/gobwas/ws"

	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
)

// TestE2EMsgLimitAckThenClose is the reference suite's test_msg_limit:
// msg-limit 20, 21 pushes stored while the user agent is away; it comes
// back, acks the 20 it is sent and closes at once (its close frame right
// behind the last ack, while the node still deletes what it acked). The
// node reads the page those acks made owed before it answers the close,
// finds the backlog past the limit and resets the user (1000 "uaid
// reset"): the next hello gets a new uaid. A client must not escape the
// limit by closing quickly (docs/engine.md, Message limit).
func TestE2EMsgLimitAckThenClose(t *testing.T) {
	const limit = 20
	st := stacktest.StartWith(t, stacktest.Options{Config: func(c *stack.Config) { c.Engine.MsgLimit = limit }})
	a := st.Left(t)
	for i := range limit + 1 {
		push(t, st, a, "600", fmt.Sprint("backlog ", i))
	}
	b := st.Reconnect(t, a)
	for range limit {
		b.Ack(b.CHID, b.Notification(t).Version)
	}
	b.SendFrame(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
	text, code, err := b.Next(et.Patience)
	if err != et.ErrClosed || code != ws.StatusNormalClosure {
		t.Fatalf("after the acks and the close: %q code %d %v, want the close answered with 1000", text, code, err)
	}
	b.Close()
	c := et.Dial(t, st.WSAddr())
	if got := c.Hello(a.UAID); got == a.UAID {
		t.Fatalf("the backlog passed msg-limit %d and the client closed at once: it kept its uaid", limit)
	}
	if n := storedCount(t, st, a.UAID); n != 0 {
		t.Fatalf("%d messages of the reset user still stored", n)
	}
}
