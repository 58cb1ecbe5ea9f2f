package scylla

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"
	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// refreshPageSize is how many channel rows refreshChannels reads per page
// and rewrites per batch: one batch of ~100 single-partition inserts stays
// under Cassandra's default batch size warning (5 KiB).
const refreshPageSize = 100

// AddChannel inserts the channel row with TTL IdleTTL+RefreshInterval
// (Connect pushes the expiry back while the user stays active). Adding
// twice rewrites the same row. 1 RT. Safe for concurrent use.
func (s *Store) AddChannel(ctx context.Context, uaid, chid uuid.UUID) error {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return fmt.Errorf("scylla: add channel: %w", err)
	}
	if err := s.open("add channel"); err != nil {
		return err
	}
	err := s.query(ctx, qAddChannel, uuidArg(uaid), uuidArg(chid), s.channelTTL).Exec()
	return wrap("add channel", err)
}

// RemoveChannel deletes the channel row (writer's clock, µs). 1 RT. Safe
// for concurrent use.
func (s *Store) RemoveChannel(ctx context.Context, uaid, chid uuid.UUID) error {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return fmt.Errorf("scylla: remove channel: %w", err)
	}
	if err := s.open("remove channel"); err != nil {
		return err
	}
	err := s.query(ctx, qRemoveChannel, uuidArg(uaid), uuidArg(chid)).Exec()
	return wrap("remove channel", err)
}

// Channels lists the clustering rows of the user's router partition. A
// partition with static columns but no channel rows yields one row whose
// chid is null; it is skipped. 1 RT per 5000 channels (driver paging). Safe
// for concurrent use.
func (s *Store) Channels(ctx context.Context, uaid uuid.UUID) ([]uuid.UUID, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return nil, fmt.Errorf("scylla: channels: %w", err)
	}
	if err := s.open("channels"); err != nil {
		return nil, err
	}
	out := []uuid.UUID{}
	iter := s.query(ctx, qChannels, uuidArg(uaid)).Iter()
	var chid uuid.UUID
	for iter.Scan((*[16]byte)(&chid)) {
		if chid != uuid.Nil {
			out = append(out, chid)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, wrap("channels", err)
	}
	return out, nil
}

// CountChannels reads the chid of at most limit+1 clustering rows (one
// more: a partition with static columns only yields one row whose chid is
// null). 1 RT per 5000 rows (driver paging). Safe for concurrent use.
func (s *Store) CountChannels(ctx context.Context, uaid uuid.UUID, limit int) (int, error) {
	if err := storage.ValidateUAID(uaid); err != nil {
		return 0, fmt.Errorf("scylla: count channels: %w", err)
	}
	if limit < 1 {
		return 0, fmt.Errorf("scylla: count channels: limit %d: %w", limit, storage.ErrInvalid)
	}
	if err := s.open("count channels"); err != nil {
		return 0, err
	}
	n := 0
	iter := s.query(ctx, qCountChannels, uuidArg(uaid), limit+1).Iter()
	var chid uuid.UUID
	for n < limit && iter.Scan((*[16]byte)(&chid)) {
		if chid != uuid.Nil {
			n++
		}
		chid = uuid.Nil
	}
	if err := iter.Close(); err != nil {
		return 0, wrap("count channels", err)
	}
	return n, nil
}

// HasChannel reads the one channel row. 1 RT. Safe for concurrent use.
func (s *Store) HasChannel(ctx context.Context, uaid, chid uuid.UUID) (bool, error) {
	if err := storage.ValidateChannel(uaid, chid); err != nil {
		return false, fmt.Errorf("scylla: has channel: %w", err)
	}
	if err := s.open("has channel"); err != nil {
		return false, err
	}
	var got uuid.UUID
	err := s.query(ctx, qHasChannel, uuidArg(uaid), uuidArg(chid)).Scan((*[16]byte)(&got))
	if errors.Is(err, gocql.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, wrap("has channel", err)
	}
	return got == chid, nil // a static-only row would carry a null chid
}

// refreshChannels rewrites every channel row of uaid and the cursor with
// TTL IdleTTL+RefreshInterval, and marks the refresh time, so that channels
// outlive the record by at most RefreshInterval and an active user never
// loses them. Runs from Connect once per RefreshInterval: per page of
// refreshPageSize channels, 1 RT to read it and 1 to rewrite it as one
// single-partition batch; the last batch also carries the cursor and the
// mark. So 2 RT for a user with up to refreshPageSize channels.
//
// Concurrency: the channel rows are rewritten with a write timestamp taken
// before they were read (now, µs), so a RemoveChannel or DropUser issued
// after the read (a later timestamp) still wins over the rewrite and no
// removed channel comes back. The cursor is rewritten with its own write
// timestamp, so a concurrent AdvanceCursor to a larger value (larger
// timestamp) still wins. The mark goes with the last page: if anything
// fails before, the next Connect refreshes again.
func (s *Store) refreshChannels(ctx context.Context, uaid uuid.UUID, st connState, now time.Time) error {
	ts := nowMicros(now)
	id := uuidArg(uaid)
	var page []byte
	for {
		iter := s.query(ctx, qChannels, id).PageSize(refreshPageSize).PageState(page).Iter()
		next := iter.PageState()
		b := s.batch(ctx, classRouterWrite)
		var chid [16]byte
		for iter.Scan(&chid) {
			if chid != uuid.Nil {
				b.Query(qRefreshChannel.cql, id, chid, ts, s.channelTTL)
			}
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("read channels: %w", err)
		}
		last := len(next) == 0
		if last {
			if st.cursor != nil && st.cursorWritetime != nil {
				b.Query(qAdvanceCursor.cql, *st.cursorWritetime, s.channelTTL, *st.cursor, id)
			}
			b.Query(qMarkRefreshed.cql, s.idleTTL, now.UnixMilli(), id)
		}
		if b.Size() > 0 {
			if err := b.Exec(); err != nil {
				return fmt.Errorf("rewrite channels: %w", err)
			}
		}
		if last {
			return nil
		}
		page = next
	}
}
