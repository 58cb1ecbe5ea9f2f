package scylla

import (
	"errors"
	"fmt"
	"testing"

	"github.com/autopush-go/autopush/storage"
)

// FuzzParseCursor: the GET /push?cursor= value (opaque to clients, so
// anything may come back) is refused with ErrInvalid or names a real
// shard, and an accepted cursor reads back the same once re-made.
func FuzzParseCursor(f *testing.F) {
	for _, c := range []string{"0.1795469915951.01a20a5a-9aba-732d-9a18-95dae542c4ef", "15.-9223372036854775808.00000000-0000-0000-0000-000000000000",
		"16.0.01a20a5a-9aba-732d-9a18-95dae542c4ef", "-1.0.x", "1.2", "1.2.3.4", "", "..", "1.99999999999999999999.01a20a5a-9aba-732d-9a18-95dae542c4ef",
		"1.0.{01a20a5a-9aba-732d-9a18-95dae542c4ef}", "1.0.urn:uuid:01a20a5a-9aba-732d-9a18-95dae542c4ef"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		shard, at, id, err := parseCursor(c)
		if err != nil {
			if !errors.Is(err, storage.ErrInvalid) {
				t.Fatalf("%q: %v, want ErrInvalid", c, err)
			}
			return
		}
		if shard < 0 || shard >= pushShards {
			t.Fatalf("%q: shard %d", c, shard)
		}
		s2, at2, id2, err := parseCursor(fmt.Sprintf("%d.%d.%s", shard, at, id))
		if err != nil || s2 != shard || at2 != at || id2 != id {
			t.Fatalf("%q re-made: %d %d %s %v", c, s2, at2, id2, err)
		}
	})
}
