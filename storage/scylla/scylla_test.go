package scylla

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

func TestApplySchemaTwice(t *testing.T) {
	cfg := testConfig(t)
	createKeyspace(t, cfg)
	if err := ApplySchema(tctx(t), cfg, testReplication); err != nil {
		t.Fatalf("second ApplySchema: %v", err)
	}
	s, err := New(tctx(t), cfg)
	if err != nil {
		t.Fatalf("New after applying twice: %v", err)
	}
	defer s.Close()
	uaid := uuid.New()
	ok(t, s.AddChannel(tctx(t), uaid, uuid.New()), "write after applying twice")
	var ttl, gcGrace int
	err = admin(t).Query(`SELECT default_time_to_live, gc_grace_seconds FROM system_schema.tables
		WHERE keyspace_name = ? AND table_name = 'router'`, cfg.Keyspace).Scan(&ttl, &gcGrace)
	ok(t, err, "read table options")
	if ttl != 5184000 || gcGrace != 86400 {
		t.Fatalf("router default_time_to_live %d, gc_grace_seconds %d", ttl, gcGrace)
	}
}

// TestSchemaAddsClientColumn: a keyspace whose push table predates the
// client column gets it from ApplySchema (twice: the second a no-op), and
// a push written before it reads with no client.
func TestSchemaAddsClientColumn(t *testing.T) {
	cfg := testConfig(t)
	// The schema as it was: no client column, no statement adding it.
	for _, stmt := range schemaStatements(cfg.Keyspace, testReplication) {
		if strings.HasPrefix(stmt, "ALTER TABLE") {
			continue
		}
		ok(t, admin(t).Query(strings.Replace(stmt, ",\n  client text", "", 1)).Exec(), "the old schema: "+firstLine(stmt))
	}
	t.Cleanup(func() { dropKeyspace(t, cfg) })
	old, err := New(tctx(t), cfg)
	ok(t, err, "open")
	now := time.Now().UnixMilli()
	before := storage.Push{ID: uuid.Must(uuid.NewV7()), Provider: "swrve", Platform: "IOS", PushKey: "k", Message: "m",
		State: storage.PushPending, At: now, Created: now, Updated: now, Version: 1}
	// The old table has no client column: a write naming it fails.
	if err := old.SavePush(tctx(t), before); err == nil {
		t.Fatal("a push saved with a client column the table lacks")
	}
	old.Close()
	ok(t, admin(t).Query("INSERT INTO "+cfg.Keyspace+".push (id, provider, platform, push_key, message, state, at, created, updated, version) "+
		"VALUES (?, 'swrve', 'IOS', 'k', 'm', 'PENDING', ?, ?, ?, 1)", before.ID[:], now, now, now).Exec(), "a row written before")
	for range 2 {
		ok(t, ApplySchema(tctx(t), cfg, testReplication), "apply the schema again")
	}
	s, err := New(tctx(t), cfg)
	ok(t, err, "open after")
	defer s.Close()
	got, err := s.GetPush(tctx(t), before.ID)
	if err != nil || got.Client != "" || got.PushKey != "k" {
		t.Fatalf("the push written before: %+v, %v", got, err)
	}
	after := before
	after.ID, after.Client = uuid.Must(uuid.NewV7()), "marketing"
	ok(t, s.SavePush(tctx(t), after), "save with a client")
	if got, err := s.GetPush(tctx(t), after.ID); err != nil || got.Client != "marketing" {
		t.Fatalf("client %q, %v", got.Client, err)
	}
}

func TestNewWithoutSchema(t *testing.T) {
	cfg := testConfig(t)
	// The keyspace does not exist.
	_, err := New(tctx(t), cfg)
	if err == nil || errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("New on a missing keyspace: %v, want a schema error", err)
	}
	t.Logf("missing keyspace: %v", err)
	// The keyspace exists without tables: New must not create them.
	ok(t, admin(t).Query("CREATE KEYSPACE "+cfg.Keyspace+" WITH replication = "+testReplication).Exec(), "create keyspace")
	t.Cleanup(func() { dropKeyspace(t, cfg) })
	_, err = New(tctx(t), cfg)
	if err == nil || errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("New on a keyspace without tables: %v, want a schema error", err)
	}
	t.Logf("missing tables: %v", err)
	var n int
	ok(t, admin(t).Query("SELECT COUNT(*) FROM system_schema.tables WHERE keyspace_name = ?", cfg.Keyspace).Scan(&n), "count tables")
	if n != 0 {
		t.Fatalf("New created %d tables", n)
	}
	// An upgrade whose schema was not applied: the tables of the version
	// before the outbound sender (router, message, broadcast), not push.
	for _, stmt := range schemaStatements(cfg.Keyspace, testReplication)[1:5] {
		if strings.HasPrefix(stmt, "ALTER TABLE") {
			continue
		}
		ok(t, admin(t).Query(stmt).Exec(), "create "+firstLine(stmt))
	}
	_, err = New(tctx(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "table "+cfg.Keyspace+".push does not exist") || !strings.Contains(err.Error(), "cqlschema") {
		t.Fatalf("New on the schema before the sender: %v, want the missing push table and cqlschema named", err)
	}
}

func TestNewUnavailable(t *testing.T) {
	// A loopback port nobody listens on: bind one, learn it, release it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ok(t, err, "listen")
	port := l.Addr().(*net.TCPAddr).Port
	ok(t, l.Close(), "close listener")
	cfg := DefaultConfig()
	cfg.Hosts = []string{"127.0.0.1:" + strconv.Itoa(port)}
	cfg.ConnectTimeout = time.Second
	start := time.Now()
	s, err := New(t.Context(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("New succeeded with no server")
	}
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("New with no server: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("New took %v to fail", d)
	}
	t.Logf("no server: %v", err)
	if err := ApplySchema(t.Context(), cfg, testReplication); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("ApplySchema with no server: %v, want ErrUnavailable", err)
	}
}

// TestStaticColumnQuirks: a partition holding only static cells reads as
// one row with a null chid; one holding only channel rows has no record.
func TestStaticColumnQuirks(t *testing.T) {
	s := newTestStore(t)
	uaid := uuid.New()
	ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "n", ConnectedAt: time.Now().UnixMilli()}), "connect")
	chans, err := s.Channels(tctx(t), uaid)
	ok(t, err, "channels")
	if len(chans) != 0 {
		t.Fatalf("static-only partition lists channels %v", chans)
	}
	has, err := s.HasChannel(tctx(t), uaid, uuid.New())
	ok(t, err, "has")
	if has {
		t.Fatal("static-only partition has a channel")
	}
	u, err := s.GetUser(tctx(t), uaid)
	ok(t, err, "get")
	if u.RouterData == nil || len(u.RouterData) != 0 {
		t.Fatalf("null router_data read as %#v, want an empty map", u.RouterData)
	}

	// Channel rows (and a cursor) without a record: no user.
	other := uuid.New()
	ok(t, s.AddChannel(tctx(t), other, uuid.New()), "add")
	ok(t, s.AdvanceCursor(tctx(t), other, storage.NewSortKey()), "advance")
	if _, err := s.GetUser(tctx(t), other); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("partition without record: %v, want ErrNotFound", err)
	}
}

// TestDropThenReconnect: a connection started after the drop re-creates
// the user; one started before it is shadowed by the drop.
func TestDropThenReconnect(t *testing.T) {
	s := newTestStore(t)
	uaid := uuid.New()
	before := time.Now().UnixMilli()
	ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "a", ConnectedAt: before}), "connect")
	ok(t, s.AddChannel(tctx(t), uaid, uuid.New()), "add")
	ok(t, s.AdvanceCursor(tctx(t), uaid, storage.NewSortKey()), "advance")
	time.Sleep(2 * time.Millisecond)
	ok(t, s.DropUser(tctx(t), uaid), "drop")

	ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "late", ConnectedAt: before}), "late connect")
	if _, err := s.GetUser(tctx(t), uaid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("connection older than the drop: %v, want ErrNotFound (shadowed)", err)
	}

	time.Sleep(2 * time.Millisecond)
	after := time.Now().UnixMilli()
	ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "b", ConnectedAt: after}), "reconnect")
	u, err := s.GetUser(tctx(t), uaid)
	ok(t, err, "get")
	if u.NodeID != "b" || u.Cursor != 0 {
		t.Fatalf("after drop and reconnect: %+v, want node b and no cursor", u)
	}
	chans, err := s.Channels(tctx(t), uaid)
	ok(t, err, "channels")
	if len(chans) != 0 {
		t.Fatalf("channels survived the drop: %v", chans)
	}
	k := storage.NewSortKey()
	ok(t, s.AdvanceCursor(tctx(t), uaid, k), "advance after drop")
	if u, _ = s.GetUser(tctx(t), uaid); u.Cursor != k {
		t.Fatalf("cursor after drop %d, want %d", u.Cursor, k)
	}
}

// TestIdleExpiry: the record expires IdleTTL after the last Connect, the
// channels IdleTTL+RefreshInterval after the last refresh, and a Connect
// after RefreshInterval refreshes all of them (several pages). Cassandra
// TTLs are whole seconds counted from the write's second, so a cell written
// at w with TTL n expires in (w+n-1s, w+n]; the checks leave that slack.
func TestIdleExpiry(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.IdleTTL = 3 * time.Second
	cfg.RefreshInterval = 2 * time.Second // channels live 5s from a refresh
	s := newTestStoreWith(t, cfg)
	uaid := uuid.New()
	chans := make([]uuid.UUID, 2*refreshPageSize+50)
	for i := range chans {
		chans[i] = uuid.New()
		ok(t, s.AddChannel(tctx(t), uaid, chans[i]), "add")
	}
	connect := func() {
		ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "n", ConnectedAt: time.Now().UnixMilli()}), "connect")
	}
	t0 := time.Now()
	connect() // first connect refreshes: channels expire in (t0+4s, t0+5s+]
	sleepUntil(t0.Add(2200 * time.Millisecond))
	connect() // refresh due: channels now expire in (t0+6.2s, t0+7.2s+], the record in (t0+4.2s, t0+5.2s+]

	sleepUntil(t0.Add(5900 * time.Millisecond))
	got, err := s.Channels(tctx(t), uaid)
	ok(t, err, "channels")
	if len(got) != len(chans) {
		t.Fatalf("%d of %d refreshed channels left at t0+5.9s", len(got), len(chans))
	}
	if _, err := s.GetUser(tctx(t), uaid); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("idle record at t0+5.9s: %v, want ErrNotFound", err)
	}

	sleepUntil(t0.Add(7800 * time.Millisecond))
	if got, err := s.Channels(tctx(t), uaid); err != nil || len(got) != 0 {
		t.Fatalf("%d channels of an idle user at t0+7.8s: %v", len(got), err)
	}
}

func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

func TestLimitsBeyondInt64(t *testing.T) {
	s := newTestStore(t)
	uaid := uuid.New()
	huge := uint64(1) << 63
	m := storage.Message{CHID: uuid.New(), SortKey: huge, TTL: 60, Version: "v"}
	if err := s.SaveMessage(tctx(t), uaid, m); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("save with sort key 2^63: %v, want ErrInvalid", err)
	}
	if err := s.AdvanceCursor(tctx(t), uaid, huge); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("cursor 2^63: %v, want ErrInvalid", err)
	}
	got, err := s.TimestampMessages(tctx(t), uaid, huge, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("fetch after 2^63: %v %v", got, err)
	}
}

// countingObserver counts the statements a store sends.
type countingObserver struct {
	mu sync.Mutex
	n  int
}

func (c *countingObserver) ObserveQuery(context.Context, gocql.ObservedQuery) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *countingObserver) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = 0
	return n
}

// TestSubscriptionReads: a push's first read is one statement when the
// channel is subscribed; without the channel's row Cassandra answers no
// row at all, so a second read tells a missing channel from a missing
// record (a push on its way to a 410).
func TestSubscriptionReads(t *testing.T) {
	count := &countingObserver{}
	cfg := testConfig(t)
	cfg.QueryObserver = count
	s := newTestStoreWith(t, cfg)
	uaid, chid := uuid.New(), uuid.New()
	ok(t, s.Connect(tctx(t), storage.User{UAID: uaid, RouterType: "webpush", NodeID: "n", ConnectedAt: time.Now().UnixMilli()}), "connect")
	ok(t, s.AddChannel(tctx(t), uaid, chid), "add")
	for _, tc := range []struct {
		what       string
		uaid, chid uuid.UUID
		has        bool
		found      bool
		statements int
	}{
		{"subscribed", uaid, chid, true, true, 1},
		{"not subscribed", uaid, uuid.New(), false, true, 2},
		{"no record", uuid.New(), chid, false, false, 2},
	} {
		count.take()
		_, has, err := s.Subscription(tctx(t), tc.uaid, tc.chid)
		if n := count.take(); has != tc.has || (err == nil) != tc.found || n != tc.statements {
			t.Errorf("%s: has %v, err %v, %d statements; want has %v, found %v, %d statements", tc.what, has, err, n, tc.has, tc.found, tc.statements)
		}
	}
}
