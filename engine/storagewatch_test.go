package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/engine"
	et "github.com/autopush-go/autopush/engine/enginetest"
	"github.com/autopush-go/autopush/storage"
)

// outageStore fails the hello's calls and the health read as an
// unreachable cluster does, while down is set.
type outageStore struct {
	storage.Store
	down atomic.Bool
}

func (o *outageStore) err(op string) error {
	if o.down.Load() {
		return fmt.Errorf("%s: no hosts available: %w", op, storage.ErrUnavailable)
	}
	return nil
}

func (o *outageStore) Health(ctx context.Context) error {
	if err := o.err("health"); err != nil {
		return err
	}
	return o.Store.Health(ctx)
}

func (o *outageStore) ConnectNew(ctx context.Context, u storage.User, chid uuid.UUID) error {
	if err := o.err("connect new"); err != nil {
		return err
	}
	return o.Store.ConnectNew(ctx, u, chid)
}

func (o *outageStore) Reconnect(ctx context.Context, u storage.User) (storage.User, error) {
	if err := o.err("reconnect"); err != nil {
		return storage.User{}, err
	}
	return o.Store.Reconnect(ctx, u)
}

// TestStorageOutageWatch: a hello that fails because storage is
// unavailable makes the node read storage's health; while that fails the
// node reports autoconnect_storage_down 1, answers new upgrades 503 with
// Retry-After and direct deliveries 503 (busy) to a client connected
// before; once storage answers again the node notices by itself (no
// request needed), and upgrades, hellos and deliveries work.
func TestStorageOutageWatch(t *testing.T) {
	store := &outageStore{Store: newStore(t)}
	srv := et.Start(t, store, et.Config())
	down := func() float64 { v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_storage_down"); return v }
	if down() != 0 {
		t.Fatal("storage down at start")
	}
	c := et.Dial(t, srv.Addr())
	uaid := c.Hello("")
	chid := uuid.NewString()
	c.Register(chid, "")

	other := et.Dial(t, srv.Addr())
	known := other.Hello("")
	other.Register(uuid.NewString(), "")
	other.Leave()

	store.down.Store(true)
	late := et.Dial(t, srv.Addr())
	late.Send(map[string]any{"messageType": "hello", "use_webpush": true, "uaid": known})
	if code := late.ExpectClose(); code != 1013 {
		t.Fatalf("hello while storage fails: closed with %d, want 1013", code)
	}
	et.Eventually(t, 10*time.Second, "autoconnect_storage_down 1", func() bool { return down() == 1 })
	if status, retry := rawUpgrade(t, srv.Addr()); status != http.StatusServiceUnavailable || retry == "" {
		t.Fatalf("upgrade while storage is down: %d, Retry-After %q", status, retry)
	}
	if code := et.Push(t, srv, uaid, et.Notification(chid, "v1", ""), ""); code != http.StatusServiceUnavailable {
		t.Fatalf("direct delivery while storage is down: %d, want 503", code)
	}

	store.down.Store(false)
	et.Eventually(t, 10*time.Second, "autoconnect_storage_down 0", func() bool { return down() == 0 })
	if status, _ := rawUpgrade(t, srv.Addr()); status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade once storage is back: %d", status)
	}
	again := et.Dial(t, srv.Addr())
	again.Hello("")
	if code := et.Push(t, srv, uaid, et.Notification(chid, "v2", ""), ""); code != http.StatusOK {
		t.Fatalf("direct delivery once storage is back: %d", code)
	}
	if n := c.Read(); n["version"] != "v2" {
		t.Fatalf("got %v, want v2 (v1 was refused)", n)
	}
}

func (o *outageStore) SaveMessage(ctx context.Context, uaid uuid.UUID, m storage.Message) error {
	if err := o.err("save message"); err != nil {
		return err
	}
	return o.Store.SaveMessage(ctx, uaid, m)
}

func (o *outageStore) DeleteMessage(ctx context.Context, uaid uuid.UUID, k storage.MessageKey) error {
	if err := o.err("delete message"); err != nil {
		return err
	}
	return o.Store.DeleteMessage(ctx, uaid, k)
}

func (o *outageStore) DeleteDelivered(ctx context.Context, uaid uuid.UUID, k storage.MessageKey, id storage.FateID) (bool, error) {
	if err := o.err("delete delivered"); err != nil {
		return false, err
	}
	return o.Store.DeleteDelivered(ctx, uaid, k, id)
}

// TestOwedWrites: what the node must write when storage fails is made
// once storage answers again, without any request asking for it
// (engine/owed.go):
//   - a client that leaves with a direct notification unacked while
//     storage fails gets it on its next connection;
//   - a stored message acked while storage fails is not sent again on the
//     next connection; a tracked one is delivered at the ack.
func TestOwedWrites(t *testing.T) {
	store := &outageStore{Store: newStore(t)}
	srv := et.Start(t, store, et.Config())
	owed := func() float64 { v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_owed_writes"); return v }
	settled := func(what string) {
		t.Helper()
		et.Eventually(t, 10*time.Second, what, func() bool {
			v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_storage_down")
			return owed() == 0 && v == 0
		})
	}

	t.Run("unacked direct notification of a client that left", func(t *testing.T) {
		c, uaid, chid := holding(t, srv)
		store.down.Store(true)
		c.Close()
		et.Eventually(t, 10*time.Second, "the notification owed", func() bool { return owed() == 1 })
		store.down.Store(false)
		settled("the owed notification stored")
		c = et.Dial(t, srv.Addr())
		c.Hello(uaid)
		wantNotification(t, c, chid, "held", "")
		c.Ack(chid, "held")
		et.NothingMore(t, srv.NodeURL(), c)
	})

	for _, tracked := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored message acked while storage fails, tracked %v", tracked), func(t *testing.T) {
			ctx := context.Background()
			c := et.Dial(t, srv.Addr())
			uaid := c.Hello("")
			chid := uuid.NewString()
			c.Register(chid, "")
			c.Leave()
			u := uuid.UUID(parseUAID(t, uaid))
			m := storage.Message{CHID: uuid.MustParse(chid), Version: "stored", SortKey: storage.NewSortKey(), TTL: 600, Tracked: tracked}
			f := storage.Fate{UAID: u, ID: storage.NewFateID(m.Version), CHID: m.CHID, MessageID: m.Version,
				Expiry: time.Now().Add(time.Hour), State: storage.FateReceived}
			if tracked {
				et.Must(t, store.Store.Track(ctx, f), "track")
			}
			et.Must(t, store.Store.SaveMessage(ctx, u, m), "save")
			c = et.Dial(t, srv.Addr())
			c.Hello(uaid)
			wantNotification(t, c, chid, "stored", "")
			store.down.Store(true)
			c.Ack(chid, "stored")
			c.Leave() // answered once the delete was tried
			if owed() != 1 {
				t.Fatalf("autoconnect_owed_writes %v after the failed delete, want 1", owed())
			}
			if tracked {
				// Delivered at the ack, though its delete is owed.
				got, err := store.Store.GetFate(ctx, u, f.ID)
				if err != nil || got.State != storage.FateDelivered {
					t.Fatalf("fate of the acked message: %v %v, want delivered", got.State, err)
				}
			}
			store.down.Store(false)
			settled("the owed delete made")
			c = et.Dial(t, srv.Addr())
			c.Hello(uaid)
			et.NothingMore(t, srv.NodeURL(), c)
		})
	}
}

// holding connects a client that holds a direct notification "held",
// read and never acked.
func holding(t *testing.T, srv *engine.Server) (c *et.Client, uaid, chid string) {
	t.Helper()
	c = et.Dial(t, srv.Addr())
	uaid = c.Hello("")
	chid = uuid.NewString()
	c.Register(chid, "")
	if code := et.Push(t, srv, uaid, et.Notification(chid, "held", ""), ""); code != http.StatusOK {
		t.Fatalf("direct delivery: %d", code)
	}
	wantNotification(t, c, chid, "held", "")
	return c, uaid, chid
}

// rawUpgrade sends a websocket handshake and returns the answer's status
// and Retry-After.
func rawUpgrade(t *testing.T, addr string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(et.Patience))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("upgrade answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// userStore fails GetUser, the router record read that names a user's
// node, while down is set.
type userStore struct {
	storage.Store
	down atomic.Bool
}

func (u *userStore) GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error) {
	if u.down.Load() {
		return storage.User{}, fmt.Errorf("get user: read timeout: %w", storage.ErrUnavailable)
	}
	return u.Store.GetUser(ctx, uaid)
}

// TestLeaveOwesTheCheck: a client leaves with a direct notification
// unacked after its user agent connected to another node. The node
// stores the notification and tells that node to check storage; when the
// router record naming it cannot be read (the store flapping), the check
// is owed and made once the read succeeds, without any request asking.
// Without it the other node's client, which checked storage before the
// store, would see the notification only at its next connection.
func TestLeaveOwesTheCheck(t *testing.T) {
	store := &userStore{Store: newStore(t)}
	srv := et.Start(t, store, et.Config())
	var notifs atomic.Int32
	var path atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path.Store(r.Method + " " + r.URL.Path)
		notifs.Add(1)
	}))
	t.Cleanup(other.Close)

	c, uaid, _ := holding(t, srv)
	id := uuid.UUID(parseUAID(t, uaid))
	// The user agent connects to the other node (its record names it,
	// newer), and the store starts failing reads.
	et.Must(t, store.Store.Connect(context.Background(), storage.User{UAID: id, RouterType: storage.RouterWebPush,
		NodeID: other.URL, ConnectedAt: time.Now().UnixMilli() + 5}), "connect elsewhere")
	store.down.Store(true)
	c.Close()
	owed := func() float64 { v, _ := et.Metric(t, srv.NodeURL(), "autoconnect_checks_owed"); return v }
	et.Eventually(t, 10*time.Second, "the check owed", func() bool { return owed() == 1 })
	if n := notifs.Load(); n != 0 {
		t.Fatalf("the other node was called %d times with the record unreadable", n)
	}
	msgs, err := store.Store.TimestampMessages(context.Background(), id, 0, 10)
	et.Must(t, err, "read stored")
	if len(msgs) != 1 || msgs[0].Version != "held" {
		t.Fatalf("stored %+v, want the held notification", msgs)
	}
	store.down.Store(false)
	et.Eventually(t, 10*time.Second, "the other node told", func() bool { return notifs.Load() == 1 })
	if got, want := path.Load(), "PUT /notif/"+uaid; got != want {
		t.Fatalf("other node got %v, want %s", got, want)
	}
	et.Eventually(t, 10*time.Second, "the check paid", func() bool {
		v, _ := et.Metric(t, srv.NodeURL(), `autoconnect_checks_owed_total{end="paid"}`)
		return owed() == 0 && v == 1
	})
}
