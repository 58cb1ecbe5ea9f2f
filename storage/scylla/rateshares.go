package scylla

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/autopush-go/autopush/storage"
)

// The sender's rate shares: table sender_rate, one row per account. Every
// write is a lightweight transaction, the first an INSERT IF NOT EXISTS,
// the others UPDATE IF version = ?, so concurrent nodes' changes are
// linearizable and one of them wins.
var (
	qGetRate    = read(`SELECT version, shares FROM sender_rate WHERE account = ?`)
	qInsertRate = messageLWT(`INSERT INTO sender_rate (account, version, shares) VALUES (?, ?, ?) IF NOT EXISTS`)
	qUpdateRate = messageLWT(`UPDATE sender_rate SET version = ?, shares = ? WHERE account = ? IF version = ?`)
)

// GetRateShares implements storage.PushStore. 1 RT.
func (s *Store) GetRateShares(ctx context.Context, account string) (storage.RateShares, error) {
	if account == "" || len(account) > storage.MaxPushField {
		return storage.RateShares{}, fmt.Errorf("scylla: get rate shares: account of %d bytes: %w", len(account), storage.ErrInvalid)
	}
	if err := s.open("get rate shares"); err != nil {
		return storage.RateShares{}, err
	}
	r, err := s.readRate(ctx, account, false)
	if err != nil {
		return storage.RateShares{}, wrap("get rate shares", err)
	}
	return r, nil
}

// readRate reads the record at the read consistency, or at LOCAL_SERIAL
// when serial.
func (s *Store) readRate(ctx context.Context, account string, serial bool) (storage.RateShares, error) {
	r := storage.RateShares{Account: account}
	var version *int64
	var shares string
	query := s.query
	if serial {
		query = s.serialRead
	}
	err := query(ctx, qGetRate, account).Scan(&version, &shares)
	if errors.Is(err, gocql.ErrNotFound) || err == nil && version == nil {
		return r, nil
	}
	if err != nil {
		return storage.RateShares{}, err
	}
	r.Version = *version
	if shares != "" {
		if err := json.Unmarshal([]byte(shares), &r.Nodes); err != nil {
			return storage.RateShares{}, fmt.Errorf("rate shares of %s: %w", account, err)
		}
	}
	return r, nil
}

// PutRateShares implements storage.PushStore: an LWT. A timeout is settled
// by a serial read, as UpdatePush does.
func (s *Store) PutRateShares(ctx context.Context, prev int64, next storage.RateShares) error {
	if err := storage.ValidateRateShares(&next); err != nil {
		return fmt.Errorf("scylla: put rate shares: %w", err)
	}
	if next.Version != prev+1 {
		return fmt.Errorf("scylla: put rate shares: version %d after %d: %w", next.Version, prev, storage.ErrInvalid)
	}
	if err := s.open("put rate shares"); err != nil {
		return err
	}
	b, err := json.Marshal(next.Nodes)
	if err != nil {
		return fmt.Errorf("scylla: put rate shares: %w", err)
	}
	var q *gocql.Query
	if prev == 0 {
		q = s.query(ctx, qInsertRate, next.Account, next.Version, string(b))
	} else {
		q = s.query(ctx, qUpdateRate, next.Version, string(b), next.Account, prev)
	}
	// ScanCAS fills the current row's columns when it did not apply; only
	// whether it applied matters here.
	applied, err := q.MapScanCAS(map[string]any{})
	if err != nil {
		got, rerr := s.readRate(ctx, next.Account, true)
		if rerr != nil || got.Version != next.Version || !sameShares(got.Nodes, next.Nodes) {
			return wrap("put rate shares", err)
		}
		applied = true
	}
	if !applied {
		return fmt.Errorf("scylla: put rate shares of %s: not at version %d: %w", next.Account, prev, storage.ErrConflict)
	}
	return nil
}

func sameShares(a, b []storage.RateShare) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
