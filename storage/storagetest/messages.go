package storagetest

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

func testTimestampPaging(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	var want []string
	for i := range 25 {
		m := msg(chid, fmt.Sprintf("data%d", i))
		saveAll(t, s, uaid, m)
		want = append(want, m.Version)
	}
	first, err := s.TimestampMessages(ctx(t), uaid, 0, 10)
	must(t, err, "first page")
	sameList(t, versions(first), want[:10], "first page")
	sameList(t, versions(fetchAll(t, s, uaid, 0, 7)), want, "all pages of 7")
	sameList(t, versions(fetchAll(t, s, uaid, first[9].SortKey, 10)), want[10:], "after the first page")

	// Topic messages never appear among timestamp messages and vice versa.
	saveAll(t, s, uaid, topicMsg(chid, "t1", "x"))
	sameList(t, versions(fetchAll(t, s, uaid, 0, 100)), want, "with a topic message present")
	tm, err := s.TopicMessages(ctx(t), uaid, 100)
	must(t, err, "topic messages")
	if len(tm) != 1 || tm[0].Topic != "t1" {
		t.Fatalf("topic messages %+v", tm)
	}
}

// testOutOfOrderAcks acks messages in an order other than delivery: an
// acked message is gone for good, the unacked ones stay.
func testOutOfOrderAcks(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	ms := make([]storage.Message, 6)
	for i := range ms {
		ms[i] = msg(chid, "")
	}
	saveAll(t, s, uaid, ms...)
	for _, i := range []int{4, 0, 2} {
		must(t, s.DeleteMessage(ctx(t), uaid, ms[i].Key()), "ack")
	}
	sameList(t, versions(fetchAll(t, s, uaid, 0, 2)), []string{ms[1].Version, ms[3].Version, ms[5].Version}, "after acks 4,0,2")
	// Acking again is harmless.
	must(t, s.DeleteMessage(ctx(t), uaid, ms[4].Key()), "ack twice")
	for _, i := range []int{5, 1, 3} {
		must(t, s.DeleteMessage(ctx(t), uaid, ms[i].Key()), "ack")
	}
	if left := fetchAll(t, s, uaid, 0, 10); len(left) != 0 {
		t.Fatalf("acked messages returned: %v", versions(left))
	}
}

func testCursorSkipsAcked(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	must(t, s.Connect(ctx(t), user(uaid, "node-a", nowMS())), "connect")
	ms := make([]storage.Message, 4)
	for i := range ms {
		ms[i] = msg(chid, "")
	}
	saveAll(t, s, uaid, ms...)
	// The client acked the first two; the cursor records it.
	for _, m := range ms[:2] {
		must(t, s.DeleteMessage(ctx(t), uaid, m.Key()), "ack")
	}
	must(t, s.AdvanceCursor(ctx(t), uaid, ms[1].SortKey), "advance")
	u, err := s.GetUser(ctx(t), uaid)
	must(t, err, "get")
	sameList(t, versions(fetchAll(t, s, uaid, u.Cursor, 10)), []string{ms[2].Version, ms[3].Version}, "after cursor")

	// A message stored after the cursor moved is still found.
	late := msg(chid, "late")
	saveAll(t, s, uaid, late)
	sameList(t, versions(fetchAll(t, s, uaid, u.Cursor, 10)), []string{ms[2].Version, ms[3].Version, late.Version}, "late message")
}

func testTopicReplacement(t *testing.T, s storage.Store) {
	uaid, a, b := uuid.New(), uuid.New(), uuid.New()
	old := topicMsg(a, "weather", "old")
	newer := topicMsg(a, "weather", "new")
	otherTopic := topicMsg(a, "news", "n")
	sameTopicOtherChannel := topicMsg(b, "weather", "b")
	saveAll(t, s, uaid, old, newer, otherTopic, sameTopicOtherChannel)

	got, err := s.TopicMessages(ctx(t), uaid, 100)
	must(t, err, "topic messages")
	byKey := map[string]storage.Message{}
	for _, m := range got {
		byKey[m.CHID.String()+"/"+m.Topic] = m
	}
	if len(got) != 3 || byKey[a.String()+"/weather"].Data != "new" || byKey[a.String()+"/news"].Data != "n" || byKey[b.String()+"/weather"].Data != "b" {
		t.Fatalf("topic messages after replacement: %+v", got)
	}

	// An older version arriving late (a slow endpoint node) loses.
	saveAll(t, s, uaid, old)
	got, err = s.TopicMessages(ctx(t), uaid, 100)
	must(t, err, "topic messages")
	for _, m := range got {
		if m.CHID == a && m.Topic == "weather" && m.Version != newer.Version {
			t.Fatalf("late older version replaced the newer one: %+v", m)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d topic messages, want 3", len(got))
	}
}

func testTopicOldAck(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	v1 := topicMsg(chid, "t", "one")
	saveAll(t, s, uaid, v1)
	v2 := topicMsg(chid, "t", "two")
	saveAll(t, s, uaid, v2)

	// The client acks v1, which it received before v2 replaced it.
	must(t, s.DeleteMessage(ctx(t), uaid, v1.Key()), "ack old version")
	got, err := s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic messages")
	if len(got) != 1 || got[0].Version != v2.Version {
		t.Fatalf("ack of the old version removed its replacement: %+v", got)
	}
	must(t, s.DeleteMessage(ctx(t), uaid, v2.Key()), "ack new version")
	got, err = s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic messages")
	if len(got) != 0 {
		t.Fatalf("acked topic message returned: %+v", got)
	}

	// A sender's DELETE names no version: it removes whatever is stored.
	v3 := topicMsg(chid, "t", "three")
	saveAll(t, s, uaid, v3)
	must(t, s.DeleteMessage(ctx(t), uaid, storage.MessageKey{CHID: chid, Topic: "t"}), "delete any version")
	got, err = s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic messages")
	if len(got) != 0 {
		t.Fatalf("versionless delete kept %+v", got)
	}
}

// received backdates m so that it expires after left.
func expiringIn(m storage.Message, ttl int64, left time.Duration) storage.Message {
	m.TTL = ttl
	m.SortKey = uint64(time.Now().Add(left - time.Duration(ttl)*time.Second).UnixNano())
	return m
}

func testTTLExpiry(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	soon := expiringIn(msg(chid, "soon"), 2, 1500*time.Millisecond)
	soonTopic := expiringIn(topicMsg(chid, "tt", "soon"), 2, 1500*time.Millisecond)
	gone := expiringIn(msg(chid, "gone"), 5, -time.Second)
	stays := msg(chid, "stays")
	saveAll(t, s, uaid, soon, soonTopic, gone, stays)

	sameList(t, versions(fetchAll(t, s, uaid, 0, 10)), []string{soon.Version, stays.Version}, "before expiry")
	tm, err := s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic")
	if len(tm) != 1 {
		t.Fatalf("topic before expiry: %+v", tm)
	}

	time.Sleep(time.Until(soon.Expiry()) + 100*time.Millisecond)
	sameList(t, versions(fetchAll(t, s, uaid, 0, 10)), []string{stays.Version}, "after expiry")
	tm, err = s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic")
	if len(tm) != 0 {
		t.Fatalf("expired topic message returned: %+v", tm)
	}
}

// testExpiredPage: expired rows between live ones must not end paging
// early, since a short page means "no more".
func testExpiredPage(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	var want []string
	for i := range 12 {
		if i%3 == 2 {
			m := msg(chid, "live")
			saveAll(t, s, uaid, m)
			want = append(want, m.Version)
			continue
		}
		saveAll(t, s, uaid, expiringIn(msg(chid, "dying"), 1, 300*time.Millisecond))
	}
	time.Sleep(500 * time.Millisecond)
	got, err := s.TimestampMessages(ctx(t), uaid, 0, 4)
	must(t, err, "page")
	sameList(t, versions(got), want, "one page over expired rows")
}

func testLargePayload(t *testing.T, s storage.Store) {
	uaid, chid := uuid.New(), uuid.New()
	m := msg(chid, strings.Repeat("AbC-_9", 5630/6)+"xy")
	if len(m.Data) != 5630 {
		t.Fatalf("test data is %d bytes", len(m.Data))
	}
	m.Headers = map[string]string{"encoding": "aesgcm", "encryption": "salt=abc", "crypto_key": "dh=BCDE"}
	tm := topicMsg(chid, "big", m.Data)
	saveAll(t, s, uaid, m, tm)

	got := fetchAll(t, s, uaid, 0, 10)
	if len(got) != 1 {
		t.Fatalf("%d messages", len(got))
	}
	g := got[0]
	if g.Data != m.Data || g.CHID != chid || g.TTL != m.TTL || g.SortKey != m.SortKey || g.Version != m.Version || g.Topic != "" || !maps.Equal(g.Headers, m.Headers) {
		t.Fatalf("round trip changed the message:\n got  %+v\n want %+v", g, m)
	}
	tg, err := s.TopicMessages(ctx(t), uaid, 10)
	must(t, err, "topic")
	if len(tg) != 1 || tg[0].Data != m.Data || tg[0].SortKey != tm.SortKey || tg[0].Version != tm.Version {
		t.Fatalf("topic round trip: %+v", tg)
	}
}

func testConcurrentSaves(t *testing.T, s storage.Store) {
	uaid := uuid.New()
	const writers, each = 8, 25
	var mu sync.Mutex
	var want []storage.Message
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chid := uuid.New()
			for range each {
				m := msg(chid, "")
				if err := s.SaveMessage(ctx(t), uaid, m); err != nil {
					t.Errorf("save: %v", err)
					return
				}
				mu.Lock()
				want = append(want, m)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	got := fetchAll(t, s, uaid, 0, 50)
	if len(got) != writers*each {
		t.Fatalf("%d messages after %d concurrent saves", len(got), writers*each)
	}
	for i := 1; i < len(got); i++ {
		if got[i].SortKey <= got[i-1].SortKey {
			t.Fatalf("not in sort key order at %d", i)
		}
	}
}

func testDropUser(t *testing.T, s storage.Store) {
	uaid, other, chid := uuid.New(), uuid.New(), uuid.New()
	for _, u := range []uuid.UUID{uaid, other} {
		must(t, s.Connect(ctx(t), user(u, "node-a", nowMS())), "connect")
		must(t, s.AddChannel(ctx(t), u, chid), "add channel")
		saveAll(t, s, u, msg(chid, "d"), topicMsg(chid, "t", "d"))
	}
	must(t, s.DropUser(ctx(t), uaid), "drop")

	_, err := s.GetUser(ctx(t), uaid)
	wantKind(t, err, storage.ErrNotFound, "dropped user")
	if ch, err := s.Channels(ctx(t), uaid); err != nil || len(ch) != 0 {
		t.Fatalf("channels of dropped user: %v %v", ch, err)
	}
	if ms := fetchAll(t, s, uaid, 0, 10); len(ms) != 0 {
		t.Fatalf("messages of dropped user: %v", versions(ms))
	}
	if tm, err := s.TopicMessages(ctx(t), uaid, 10); err != nil || len(tm) != 0 {
		t.Fatalf("topic messages of dropped user: %v %v", tm, err)
	}

	// The other user is untouched.
	if _, err := s.GetUser(ctx(t), other); err != nil {
		t.Fatalf("other user: %v", err)
	}
	hasChannels(t, s, other, chid)
	if ms := fetchAll(t, s, other, 0, 10); len(ms) != 1 {
		t.Fatalf("other user's messages: %d", len(ms))
	}
}
