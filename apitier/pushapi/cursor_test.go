package pushapi

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func testCursors(t testing.TB, fill byte) *cursors {
	t.Helper()
	c, err := newCursors(bytes.Repeat([]byte{fill}, CursorKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A cursor opens for the client and listing it was sealed for, under the
// key it was sealed with, and for nothing else: not another client's,
// another listing's, altered at any bit, truncated at any length, nor
// under another key. Its text shows nothing of the store's cursor.
func TestCursorSealing(t *testing.T) {
	c, other := testCursors(t, 1), testCursors(t, 2)
	id := uuid.New()
	inner := "3.1796585435722." + id.String() // scylla's form: shard, time, id
	s, err := c.seal("team-b", "state=SENT", inner)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.open("team-b", "state=SENT", s); !ok || got != inner {
		t.Fatalf("open: %q %v", got, ok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range [][]byte{[]byte(id.String()), id[:], []byte("1796585435722")} {
		if bytes.Contains(raw, leak) || strings.Contains(s, string(leak)) {
			t.Errorf("the cursor %s shows %q", s, leak)
		}
	}
	if again, _ := c.seal("team-b", "state=SENT", inner); again == s {
		t.Error("two cursors of one position are alike: one gives the other away")
	}
	for what, ok := range map[string]bool{
		"another client":  open(c, "team-a", "state=SENT", s),
		"another listing": open(c, "team-b", "state=FAILED", s),
		"another key":     open(other, "team-b", "state=SENT", s),
		"a search":        open(c, "team-b", "pushKey=state=SENT", s),
	} {
		if ok {
			t.Errorf("%s opens it", what)
		}
	}
	for i := range len(raw) * 8 {
		flipped := bytes.Clone(raw)
		flipped[i/8] ^= 1 << (i % 8)
		if open(c, "team-b", "state=SENT", base64.RawURLEncoding.EncodeToString(flipped)) {
			t.Fatalf("bit %d flipped opens", i)
		}
	}
	for n := 1; n < len(s); n++ {
		if open(c, "team-b", "state=SENT", s[:n]) {
			t.Fatalf("the first %d characters open", n)
		}
	}
	if got, ok := c.open("team-b", "state=SENT", ""); !ok || got != "" {
		t.Errorf(`"" (the first page): %q %v`, got, ok)
	}
	if last, err := c.seal("team-b", "state=SENT", ""); err != nil || last != "" {
		t.Errorf(`the store's "" (no more pages) sealed: %q %v`, last, err)
	}
	if _, err := newCursors(make([]byte, 16)); err == nil {
		t.Error("a 16-byte key is taken")
	}
}

func open(c *cursors, client, listing, s string) bool {
	_, ok := c.open(client, listing, s)
	return ok
}

// FuzzCursor: opening never panics, and opens only what was sealed for
// the same client and listing, giving back what was sealed.
func FuzzCursor(f *testing.F) {
	c := testCursors(f, 7)
	for _, inner := range []string{"AAABokzcbXQtbHQcQ-dU94V4-oG7SLVh", "0.-9223372036854775808.00000000-0000-0000-0000-000000000000", "x"} {
		s, err := c.seal("key-1", "state=RETRY", inner)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s, "key-1", "state=RETRY")
		f.Add(s[:len(s)-1], "key-1", "state=RETRY")
		f.Add(s, "key-2", "state=RETRY")
	}
	f.Add("", "a", "pushKey=k")
	f.Add("%ff%00", "a", "pushKey=k")
	f.Add(strings.Repeat("A", 600), "a", "pushKey=k")
	f.Fuzz(func(t *testing.T, s, client, listing string) {
		if inner, ok := c.open(client, listing, s); ok && s != "" {
			// Only a cursor sealed for them opens: it seals and opens
			// back to what it held.
			again, err := c.seal(client, listing, inner)
			if err != nil {
				t.Fatal(err)
			}
			if back, ok := c.open(client, listing, again); !ok || back != inner {
				t.Fatalf("resealed %q opens to %q %v", inner, back, ok)
			}
		}
		if client == "" || strings.Contains(client, "\x00") || len(listing) > 300 {
			return
		}
		sealed, err := c.seal(client, listing, "inner")
		if err != nil {
			t.Fatal(err)
		}
		if inner, ok := c.open(client, listing, sealed); !ok || inner != "inner" {
			t.Fatalf("sealed for %q %q opens to %q %v", client, listing, inner, ok)
		}
		if _, ok := c.open(client+"x", listing, sealed); ok {
			t.Fatal("another client opens it")
		}
	})
}
