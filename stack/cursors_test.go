package stack_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// cursorsOf pages through GET /push?query with pages of limit and
// returns every "next" it was given.
func (a pushAPI) cursorsOf(query string, limit int) []string {
	a.t.Helper()
	_, bodies := a.listed(query, limit)
	var out []string
	for _, body := range bodies {
		var page struct{ Next *string }
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			a.t.Fatal(err)
		}
		if page.Next != nil {
			out = append(out, *page.Next)
		}
	}
	return out
}

// wantNoID fails when cursor shows id: as text, or its bytes once the
// cursor is decoded (base64url, as the embedded store's was).
func wantNoID(t *testing.T, cursor string, id uuid.UUID) {
	t.Helper()
	raw, _ := base64.RawURLEncoding.DecodeString(cursor)
	for _, form := range []string{id.String(), strings.ReplaceAll(id.String(), "-", "")} {
		if strings.Contains(cursor, form) || bytes.Contains(raw, []byte(form)) {
			t.Fatalf("the cursor %s shows the push id %s", cursor, id)
		}
	}
	if bytes.Contains(raw, id[:]) {
		t.Fatalf("the cursor %s holds the push id %s's bytes", cursor, id)
	}
}

// wantBadCursor wants 400 errno null naming the cursor.
func wantBadCursor(t *testing.T, what string, a apitiertest.Answer) {
	t.Helper()
	if a.Status != http.StatusBadRequest {
		t.Fatalf("%s: %d %s, want 400", what, a.Status, a.Body)
	}
	if body := apitiertest.WantError(t, a, http.StatusBadRequest, errno.None); !strings.HasPrefix(body["message"].(string), "cursor: ") {
		t.Errorf("%s: %s, want a message naming the cursor", what, a.Body)
	}
}

// TestListCursorsSealed: a list's cursors are opaque and the client's.
// Client B paging SCHEDULED one or two at a time (pages cut before the
// other client's pushes are filtered out) is given no cursor that shows
// one of client A's push ids. A cursor is refused (400, errno null) when
// another client presents it, for another listing, altered at any of
// its bytes, cut, or on a node whose CRYPTO_KEY has another first key (a
// rotation); a node with the same CRYPTO_KEY takes it and gives the next
// page. On both backends.
func TestListCursorsSealed(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		st := stacktest.StartWith(t, stacktest.Options{Through: through})
		a, b, admin := as(t, st, stacktest.TeamA.Key), as(t, st, stacktest.TeamB.Key), as(t, st, stacktest.PushAPIKey)
		var aIDs []uuid.UUID
		for range 3 {
			aIDs = append(aIDs, uuid.MustParse(idOf(a.post("user-a", later))))
			b.post("user-b", later)
		}
		var bCursors []string
		for _, limit := range []int{1, 2} {
			bCursors = append(bCursors, b.cursorsOf("state=SCHEDULED", limit)...)
			bCursors = append(bCursors, b.cursorsOf("pushKey=user-b", limit)...)
		}
		if len(bCursors) < 4 {
			t.Fatalf("B was given %d cursors: the test checks nothing", len(bCursors))
		}
		for _, c := range bCursors {
			for _, id := range aIDs {
				wantNoID(t, c, id)
			}
		}

		aCursor := a.cursorsOf("state=SCHEDULED", 1)[0]
		aSearch := a.cursorsOf("pushKey=user-a", 1)[0]
		adminCursor := admin.cursorsOf("state=SCHEDULED", 1)[0]
		if ans := a.do(http.MethodGet, "/push?state=SCHEDULED&limit=1&cursor="+aCursor, nil); ans.Status != http.StatusOK {
			t.Fatalf("A's own cursor: %d %s", ans.Status, ans.Body)
		}
		for what, ans := range map[string]apitiertest.Answer{
			"A's cursor presented by B":         b.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+aCursor, nil),
			"A's cursor presented by an admin":  admin.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+aCursor, nil),
			"an admin's cursor presented by A":  a.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+adminCursor, nil),
			"A's search cursor presented by B":  b.do(http.MethodGet, "/push?pushKey=user-a&cursor="+aSearch, nil),
			"A's cursor for another state":      a.do(http.MethodGet, "/push?state=PENDING&cursor="+aCursor, nil),
			"A's list cursor for a search":      a.do(http.MethodGet, "/push?pushKey=user-a&cursor="+aCursor, nil),
			"A's search cursor for another key": a.do(http.MethodGet, "/push?pushKey=user-b&cursor="+aSearch, nil),
			"A's search cursor for a list":      a.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+aSearch, nil),
			"A's cursor cut by one":             a.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+aCursor[:len(aCursor)-1], nil),
			"A's cursor cut in half":            a.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+aCursor[:len(aCursor)/2], nil),
		} {
			wantBadCursor(t, what, ans)
		}
		raw, err := base64.RawURLEncoding.DecodeString(aCursor)
		if err != nil {
			t.Fatal(err)
		}
		for i := range raw {
			flipped := bytes.Clone(raw)
			flipped[i] ^= 1 << (i % 8)
			wantBadCursor(t, "A's cursor with a bit flipped", a.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+base64.RawURLEncoding.EncodeToString(flipped), nil))
		}

		// Other nodes over the same store: one with the same CRYPTO_KEY
		// takes the cursor, one whose first key is new refuses it.
		node := func(cryptoKey string) pushAPI {
			other := stacktest.StartWith(t, stacktest.Options{
				Through: func(s storage.Store) storage.Store {
					if through != nil {
						return through(s)
					}
					return st.Store
				},
				Config: func(c *stack.Config) {
					c.CryptoKey = cryptoKey
					c.Sender.SenderConfig.Workers = false // st's sender sends
				}})
			return as(t, other, stacktest.TeamA.Key)
		}
		same := node(stacktest.Config(t).CryptoKey)
		ans := same.do(http.MethodGet, "/push?state=SCHEDULED&limit=1&cursor="+aCursor, nil)
		here := a.do(http.MethodGet, "/push?state=SCHEDULED&limit=1&cursor="+aCursor, nil)
		if ans.Status != http.StatusOK || !bytes.Equal(pushesOnly(t, ans), pushesOnly(t, here)) {
			t.Errorf("another node with the same CRYPTO_KEY: %d %s, want the page this node gives: %s", ans.Status, ans.Body, here.Body)
		}
		rotated := node(token.GenerateKey() + "," + stacktest.Config(t).CryptoKey)
		wantBadCursor(t, "a cursor after a key rotation", rotated.do(http.MethodGet, "/push?state=SCHEDULED&cursor="+aCursor, nil))
	})
}

// pushesOnly is a listing's "pushes", as JSON.
func pushesOnly(t *testing.T, a apitiertest.Answer) []byte {
	t.Helper()
	var page struct{ Pushes json.RawMessage }
	if err := json.Unmarshal(a.Body, &page); err != nil {
		t.Fatalf("%d %s: %v", a.Status, a.Body, err)
	}
	return page.Pushes
}
