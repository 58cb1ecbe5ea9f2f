package stack_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// leakyIndexes is leakyStore failing the push API's index reads too.
type leakyIndexes struct{ *leakyStore }

func (l leakyIndexes) PushesByKey(ctx context.Context, client, pushKey, cursor string, limit int) ([]storage.Push, string, error) {
	if err := l.err("pushes by key"); err != nil {
		return nil, "", err
	}
	return l.Store.PushesByKey(ctx, client, pushKey, cursor, limit)
}

func (l leakyIndexes) CountOpen(ctx context.Context, client string, limit int) (int, error) {
	if err := l.err("count open"); err != nil {
		return 0, err
	}
	return l.Store.CountOpen(ctx, client, limit)
}

// TestPushAPIStorageErrorsSayWhatFailed: with the store unavailable,
// each push API route answers 503 errno 201 saying what it was doing: a
// read says it was reading, never saving.
func TestPushAPIStorageErrorsSayWhatFailed(t *testing.T) {
	leaky := &leakyStore{}
	st := stacktest.StartWith(t, stacktest.Options{
		Through: func(s storage.Store) storage.Store { leaky.Store = s; return leakyIndexes{leaky} }})
	admin, teamA := as(t, st, stacktest.PushAPIKey), as(t, st, stacktest.TeamA.Key)
	loc := admin.post("u", later)
	leaky.failing.Store(true)
	defer leaky.failing.Store(false)
	for _, c := range []struct {
		what, want string
		ans        apitiertest.Answer
	}{
		{"POST /push", "Database error while saving the push", admin.do(http.MethodPost, "/push", pushBody("u", later))},
		{"POST /push within a quota", "Database error while counting the client's pushes not yet sent",
			teamA.do(http.MethodPost, "/push", pushBody("u", later))},
		{"GET /push/{id}", "Database error while reading the push", admin.do(http.MethodGet, loc, nil)},
		{"GET /push?state=", "Database error while reading pushes", admin.do(http.MethodGet, "/push?state=SCHEDULED", nil)},
		{"GET /push?pushKey=", "Database error while reading pushes", admin.do(http.MethodGet, "/push?pushKey=u", nil)},
		{"DELETE /push/{id}", "Database error while cancelling the push", admin.do(http.MethodDelete, loc, nil)},
	} {
		if body := apitiertest.WantError(t, c.ans, http.StatusServiceUnavailable, errno.RetryBackoff); body["message"] != c.want {
			t.Errorf("%s: %q, want %q", c.what, body["message"], c.want)
		}
	}
}
