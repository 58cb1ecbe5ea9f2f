package stack_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// backendWords are what an answer to a stranger must never name: the
// storage backends, their drivers and the store's own error texts.
var backendWords = []string{"scylla", "cql", "cassandra", "pebble", "embedded", "gocql", "storage:", "keyspace", "no hosts", "leaky"}

// wantNoBackend fails when an answer's body names any of backendWords.
func wantNoBackend(t *testing.T, what string, a apitiertest.Answer) {
	t.Helper()
	body := strings.ToLower(string(a.Body))
	for _, w := range backendWords {
		if strings.Contains(body, w) {
			t.Errorf("%s: %d %s names %q", what, a.Status, a.Body, w)
		}
	}
}

// leakyStore fails every call once failing is set, with an error whose
// text names backend internals, as a real driver's does.
type leakyStore struct {
	storage.Store
	failing atomic.Bool
}

func (l *leakyStore) err(op string) error {
	if !l.failing.Load() {
		return nil
	}
	return fmt.Errorf("scylla: %s: gocql: no hosts available in the pool (keyspace autopush, pebble embedded WAL, leaky): %w",
		op, storage.ErrUnavailable)
}

func (l *leakyStore) GetUser(ctx context.Context, uaid uuid.UUID) (storage.User, error) {
	if err := l.err("get user"); err != nil {
		return storage.User{}, err
	}
	return l.Store.GetUser(ctx, uaid)
}

func (l *leakyStore) Subscription(ctx context.Context, uaid, chid uuid.UUID) (storage.User, bool, error) {
	if err := l.err("subscription"); err != nil {
		return storage.User{}, false, err
	}
	return l.Store.Subscription(ctx, uaid, chid)
}

func (l *leakyStore) Reconnect(ctx context.Context, u storage.User) (storage.User, error) {
	if err := l.err("reconnect"); err != nil {
		return storage.User{}, err
	}
	return l.Store.Reconnect(ctx, u)
}

func (l *leakyStore) ConnectNew(ctx context.Context, u storage.User, chid uuid.UUID) error {
	if err := l.err("connect new"); err != nil {
		return err
	}
	return l.Store.ConnectNew(ctx, u, chid)
}

func (l *leakyStore) Connect(ctx context.Context, u storage.User) error {
	if err := l.err("connect"); err != nil {
		return err
	}
	return l.Store.Connect(ctx, u)
}

func (l *leakyStore) DeleteMessage(ctx context.Context, uaid uuid.UUID, k storage.MessageKey) error {
	if err := l.err("delete message"); err != nil {
		return err
	}
	return l.Store.DeleteMessage(ctx, uaid, k)
}

func (l *leakyStore) DeleteDelivered(ctx context.Context, uaid uuid.UUID, k storage.MessageKey, id storage.FateID) (bool, error) {
	if err := l.err("delete delivered"); err != nil {
		return false, err
	}
	return l.Store.DeleteDelivered(ctx, uaid, k, id)
}

func (l *leakyStore) SavePush(ctx context.Context, p storage.Push) error {
	if err := l.err("save push"); err != nil {
		return err
	}
	return l.Store.SavePush(ctx, p)
}

func (l *leakyStore) GetPush(ctx context.Context, id uuid.UUID) (storage.Push, error) {
	if err := l.err("get push"); err != nil {
		return storage.Push{}, err
	}
	return l.Store.GetPush(ctx, id)
}

func (l *leakyStore) ListPushes(ctx context.Context, state storage.PushState, cursor string, limit int) ([]storage.Push, string, error) {
	if err := l.err("list pushes"); err != nil {
		return nil, "", err
	}
	return l.Store.ListPushes(ctx, state, cursor, limit)
}

func (l *leakyStore) PutBroadcast(ctx context.Context, id, version string) error {
	if err := l.err("put broadcast"); err != nil {
		return err
	}
	return l.Store.PutBroadcast(ctx, id, version)
}

func (l *leakyStore) Broadcasts(ctx context.Context) (map[string]string, error) {
	if err := l.err("broadcasts"); err != nil {
		return nil, err
	}
	return l.Store.Broadcasts(ctx)
}

func (l *leakyStore) Health(ctx context.Context) error {
	if err := l.err("health"); err != nil {
		return err
	}
	return l.Store.Health(ctx)
}

const errorsBroadcastToken = "errors-test-publisher-token"

// TestErrorsNameNoBackend: no answer of the push API names the storage
// backend or its internals, whatever the store's error says: with every
// storage call failing with a driver's text (503s, the health routes),
// and, on each real backend, a cursor the store refuses (400).
func TestErrorsNameNoBackend(t *testing.T) {
	leaky := &leakyStore{}
	st := stacktest.StartWith(t, stacktest.Options{
		Through: func(s storage.Store) storage.Store { leaky.Store = s; return leaky },
		Config:  func(c *stack.Config) { c.API.BroadcastTokens = []string{errorsBroadcastToken} },
	})
	sub := st.Subscribe(t, "")
	sub.Close()
	stored := st.Push(t, sub.Endpoint, sub, "", nil)
	if stored.Status != http.StatusCreated {
		t.Fatalf("push before the failures: %d %s", stored.Status, stored.Body)
	}
	base := st.EndpointURL()
	pushKey := "Bearer " + stacktest.PushAPIKey
	leaky.failing.Store(true)
	for what, a := range map[string]apitiertest.Answer{
		"push":            st.Push(t, sub.Endpoint, sub, "", nil),
		"delete":          apitiertest.Send(t, http.MethodDelete, stored.Header.Get("Location"), nil),
		"POST /push":      apitiertest.Send(t, http.MethodPost, base+"/push", []byte(`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"d","message":"m"}`), "Authorization", pushKey),
		"GET /push/{id}":  apitiertest.Send(t, http.MethodGet, base+"/push/"+uuid.NewString(), nil, "Authorization", pushKey),
		"GET /push":       apitiertest.Send(t, http.MethodGet, base+"/push?state=SENT", nil, "Authorization", pushKey),
		"publish":         apitiertest.Send(t, http.MethodPut, base+"/v1/broadcasts/a/b", []byte(`"v1"`), "Authorization", "Bearer "+errorsBroadcastToken),
		"list broadcasts": apitiertest.Send(t, http.MethodGet, base+"/v1/broadcasts", nil, "Authorization", "Bearer "+errorsBroadcastToken),
		"register":        apitiertest.Send(t, http.MethodPost, base+"/v1/fcm/"+stacktest.FCMApp+"/registration", []byte(`{"token":"t-0123456789"}`), "Content-Type", "application/json"),
		"/__heartbeat__":  apitiertest.Send(t, http.MethodGet, base+"/__heartbeat__", nil),
		"/health":         apitiertest.Send(t, http.MethodGet, base+"/health", nil),
	} {
		if a.Status < 400 {
			t.Errorf("%s with storage failing: %d %s", what, a.Status, a.Body)
		}
		wantNoBackend(t, what, a)
	}
	leaky.failing.Store(false)

	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		st := stacktest.StartWith(t, stacktest.Options{Through: through})
		for _, cursor := range []string{"nope", "AAAA", "%ff%00", strings.Repeat("z", 200)} {
			a := apitiertest.Send(t, http.MethodGet, st.EndpointURL()+"/push?state=SENT&cursor="+cursor, nil, "Authorization", pushKey)
			if a.Status != http.StatusBadRequest {
				t.Errorf("cursor %q: %d %s, want 400", cursor, a.Status, a.Body)
			}
			wantNoBackend(t, "cursor "+cursor, a)
		}
	})
}
