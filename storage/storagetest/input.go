package storagetest

import (
	"context"
	"strings"
	"testing"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

// testInvalidInput: each call must fail with ErrInvalid and leave no trace
// of the user it named.
func testInvalidInput(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	bad := func(mut func(*storage.Message)) storage.Message {
		m := msg(chid, "ok")
		mut(&m)
		return m
	}
	cases := []struct {
		name string
		call func(context.Context) error
	}{
		{"connect nil uaid", func(c context.Context) error { return s.Connect(c, user(uuid.Nil, "n", nowMS())) }},
		{"connect zero connected_at", func(c context.Context) error { return s.Connect(c, user(uaid, "n", 0)) }},
		{"connect bad router type", func(c context.Context) error {
			u := user(uaid, "n", nowMS())
			u.RouterType = "Web Push!"
			return s.Connect(c, u)
		}},
		{"connect huge node id", func(c context.Context) error {
			return s.Connect(c, user(uaid, strings.Repeat("n", storage.MaxNodeIDLen+1), nowMS()))
		}},
		{"connect huge router data", func(c context.Context) error {
			u := user(uaid, "n", nowMS())
			u.RouterData = map[string]string{"token": strings.Repeat("x", storage.MaxRouterData)}
			return s.Connect(c, u)
		}},
		{"get nil uaid", func(c context.Context) error { _, err := s.GetUser(c, uuid.Nil); return err }},
		{"add nil channel", func(c context.Context) error { return s.AddChannel(c, uaid, uuid.Nil) }},
		{"add channel nil uaid", func(c context.Context) error { return s.AddChannel(c, uuid.Nil, chid) }},
		{"save zero ttl", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.TTL = 0 }))
		}},
		{"save negative ttl", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.TTL = -5 }))
		}},
		{"save ttl over max", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.TTL = storage.MaxTTL + 1 }))
		}},
		{"save nil channel", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.CHID = uuid.Nil }))
		}},
		{"save zero sort key", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.SortKey = 0 }))
		}},
		{"save empty version", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.Version = "" }))
		}},
		{"save long topic", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.Topic = strings.Repeat("a", 33) }))
		}},
		{"save topic not base64url", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.Topic = "a b" }))
		}},
		{"save data not base64url", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.Data = "padded==" }))
		}},
		{"save data too large", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) { m.Data = strings.Repeat("A", storage.MaxDataLen+1) }))
		}},
		{"save too many headers", func(c context.Context) error {
			return s.SaveMessage(c, uaid, bad(func(m *storage.Message) {
				m.Headers = map[string]string{}
				for i := range storage.MaxHeaders + 1 {
					m.Headers[string(rune('a'+i))] = "v"
				}
			}))
		}},
		{"save nil uaid", func(c context.Context) error { return s.SaveMessage(c, uuid.Nil, msg(chid, "ok")) }},
		{"delete timestamp key without sort key", func(c context.Context) error {
			return s.DeleteMessage(c, uaid, storage.MessageKey{CHID: chid})
		}},
		{"fetch zero limit", func(c context.Context) error { _, err := s.TimestampMessages(c, uaid, 0, 0); return err }},
		{"fetch huge limit", func(c context.Context) error {
			_, err := s.TimestampMessages(c, uaid, 0, storage.MaxFetchLimit+1)
			return err
		}},
		{"topic fetch negative limit", func(c context.Context) error { _, err := s.TopicMessages(c, uaid, -1); return err }},
		{"advance cursor nil uaid", func(c context.Context) error { return s.AdvanceCursor(c, uuid.Nil, 5) }},
		{"clear node nil uaid", func(c context.Context) error { return s.ClearNode(c, uuid.Nil, 5) }},
	}
	for _, tc := range cases {
		wantKind(t, tc.call(ctx(t)), storage.ErrInvalid, tc.name)
	}

	// Nothing of uaid was written.
	_, err := s.GetUser(ctx(t), uaid)
	wantKind(t, err, storage.ErrNotFound, "user after invalid calls")
	if ch, err := s.Channels(ctx(t), uaid); err != nil || len(ch) != 0 {
		t.Fatalf("channels after invalid calls: %v %v", ch, err)
	}
	if ms := fetchAll(t, s, uaid, 0, 10); len(ms) != 0 {
		t.Fatalf("messages after invalid calls: %v", versions(ms))
	}
	if tm, err := s.TopicMessages(ctx(t), uaid, 10); err != nil || len(tm) != 0 {
		t.Fatalf("topic messages after invalid calls: %v %v", tm, err)
	}
}

func testHealth(t *testing.T, s storage.Store) {
	must(t, s.Health(ctx(t)), "health")
}

func testClosed(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	must(t, s.Close(), "close")
	wantKind(t, s.Health(ctx(t)), storage.ErrUnavailable, "health after close")
	_, err := s.GetUser(ctx(t), uaid)
	wantKind(t, err, storage.ErrUnavailable, "get after close")
	wantKind(t, s.SaveMessage(ctx(t), uaid, msg(uuid.New(), "")), storage.ErrUnavailable, "save after close")
	wantKind(t, s.Connect(ctx(t), user(uaid, "n", nowMS())), storage.ErrUnavailable, "connect after close")
	wantKind(t, s.PutBroadcast(ctx(t), "a/b", "v"), storage.ErrUnavailable, "put broadcast after close")
	_, err = s.Broadcasts(ctx(t))
	wantKind(t, err, storage.ErrUnavailable, "broadcasts after close")
}
