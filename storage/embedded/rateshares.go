package embedded

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/autopush-go/autopush/storage"
)

// Rate shares (the sender's): one key per provider account,
//
//	'q' account -> storage.RateShares (JSON)
//
// compared and set under Store.rateMu (one process holds the directory,
// so a mutex is the whole of the compare-and-set).
const prefixRate = 'q'

func rateKey(account string) []byte { return append([]byte{prefixRate}, account...) }

func (s *Store) getRateShares(account string) (storage.RateShares, error) {
	v, err := s.get(rateKey(account))
	if err != nil || v == nil {
		return storage.RateShares{Account: account}, err
	}
	var r storage.RateShares
	if err := json.Unmarshal(v, &r); err != nil {
		return storage.RateShares{}, fmt.Errorf("rate shares of %s: %w", account, errCorrupt)
	}
	return r, nil
}

// GetRateShares implements storage.PushStore. One local read.
func (s *Store) GetRateShares(ctx context.Context, account string) (storage.RateShares, error) {
	if account == "" || len(account) > storage.MaxPushField {
		return storage.RateShares{}, fmt.Errorf("embedded: get rate shares: account of %d bytes: %w", len(account), storage.ErrInvalid)
	}
	if err := s.enter(ctx, "get rate shares"); err != nil {
		return storage.RateShares{}, err
	}
	defer s.leave()
	r, err := s.getRateShares(account)
	if err != nil {
		return storage.RateShares{}, failed("get rate shares", err)
	}
	return r, nil
}

// PutRateShares implements storage.PushStore. One local read and one
// durable write.
func (s *Store) PutRateShares(ctx context.Context, prev int64, next storage.RateShares) error {
	if err := storage.ValidateRateShares(&next); err != nil {
		return fmt.Errorf("embedded: put rate shares: %w", err)
	}
	if next.Version != prev+1 {
		return fmt.Errorf("embedded: put rate shares: version %d after %d: %w", next.Version, prev, storage.ErrInvalid)
	}
	if err := s.enter(ctx, "put rate shares"); err != nil {
		return err
	}
	defer s.leave()
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	cur, err := s.getRateShares(next.Account)
	if err != nil {
		return failed("put rate shares", err)
	}
	if cur.Version != prev {
		return fmt.Errorf("embedded: put rate shares of %s: version %d, not %d: %w", next.Account, cur.Version, prev, storage.ErrConflict)
	}
	v, err := json.Marshal(&next)
	if err != nil {
		return failed("put rate shares", err)
	}
	b := s.db.NewBatch()
	b.Set(rateKey(next.Account), v, nil)
	if err := s.commit(b); err != nil {
		return failed("put rate shares", err)
	}
	return nil
}
