package embedded

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/uuid"
)

// stripeCounts holds one lock stripe's count keys (fates.go: 'n' and
// 'l') at their committed values, each read from Pebble the first time
// it is needed. A stripe's counts are only written under its lock, so
// the map is touched only under it too, and a move reads no count from
// Pebble: that was three or four reads of the store per move.
type stripeCounts map[string]uint64

// countBatch is a batch that also writes counts of one stripe; the
// values it sets reach the stripe's stripeCounts when it commits. The
// caller holds the stripe's lock from newCountBatch to commit.
type countBatch struct {
	*pebble.Batch
	s      *Store
	stripe byte
	set    []countValue // at most a few: a move's two live counts, its milestone
}

type countValue struct {
	key string
	n   uint64
}

func (s *Store) newCountBatch(uaid uuid.UUID) *countBatch {
	return &countBatch{Batch: s.db.NewBatch(), s: s, stripe: stripeIndex(uaid)}
}

// add adds delta (two's complement) to the 8-byte count k in b.
func (b *countBatch) add(k []byte, delta uint64) error {
	n, err := b.value(k)
	if err != nil {
		return err
	}
	n += delta
	b.Set(k, binary.BigEndian.AppendUint64(nil, n), nil)
	for i := range b.set {
		if b.set[i].key == string(k) {
			b.set[i].n = n
			return nil
		}
	}
	b.set = append(b.set, countValue{string(k), n})
	return nil
}

// value is count k as b would leave it so far.
func (b *countBatch) value(k []byte) (uint64, error) {
	for _, c := range b.set {
		if c.key == string(k) {
			return c.n, nil
		}
	}
	if n, ok := b.s.counts[b.stripe][string(k)]; ok {
		return n, nil
	}
	v, err := b.s.get(k)
	switch {
	case err != nil:
		return 0, err
	case len(v) == 8:
		return binary.BigEndian.Uint64(v), nil
	case v != nil:
		return 0, fmt.Errorf("count %x: %w", k, errCorrupt)
	}
	return 0, nil
}

// commit commits b with opts and keeps the counts it wrote; a failed
// commit forgets them, so that they are read again from Pebble.
func (b *countBatch) commit(opts *pebble.WriteOptions) error {
	defer b.Close()
	err := b.Commit(opts)
	c := b.s.counts[b.stripe]
	if c == nil && err == nil && len(b.set) > 0 {
		c = make(stripeCounts)
		b.s.counts[b.stripe] = c
	}
	for _, v := range b.set {
		if err != nil {
			delete(c, v.key)
		} else {
			c[v.key] = v.n
		}
	}
	return err
}
