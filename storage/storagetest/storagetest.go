package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/storage"
	"github.com/google/uuid"
)

// Harness makes stores for the suite.
type Harness struct {
	// New returns an empty store isolated from every other store it
	// returned; the harness closes and removes it in t.Cleanup.
	New func(t testing.TB) storage.Store
}

// Run runs the whole conformance suite against the backend h makes.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, storage.Store)
	}{
		{"UserLifecycle", testUserLifecycle},
		{"ConnectNew", testConnectNew},
		{"Reconnect", testReconnect},
		{"NewestConnectionWins", testNewestConnectionWins},
		{"ClearNodeOnlyIfConnectedAtMatches", testClearNode},
		{"ConcurrentConnectAndClear", testConcurrentConnectAndClear},
		{"CursorOnlyMovesForward", testCursor},
		{"Channels", testChannels},
		{"Subscription", testSubscription},
		{"HundredsOfChannels", testHundredsOfChannels},
		{"CountChannels", testCountChannels},
		{"TimestampMessagesPaging", testTimestampPaging},
		{"NoRedeliveryAfterOutOfOrderAcks", testOutOfOrderAcks},
		{"CursorSkipsAcked", testCursorSkipsAcked},
		{"TopicReplacement", testTopicReplacement},
		{"TopicAckOfOldVersionKeepsNew", testTopicOldAck},
		{"TTLExpiry", testTTLExpiry},
		{"ExpiredRowsDoNotShortenPages", testExpiredPage},
		{"LargePayloadRoundTrip", testLargePayload},
		{"ConcurrentSaves", testConcurrentSaves},
		{"DropUserRemovesEverything", testDropUser},
		{"DropUserAtKeepsNewerConnection", testDropUserAt},
		{"InvalidInputRejected", testInvalidInput},
		{"Broadcasts", testBroadcasts},
		{"ConcurrentBroadcasts", testConcurrentBroadcasts},
		{"InvalidBroadcastsRejected", testInvalidBroadcasts},
		{"Health", testHealth},
		{"ClosedStoreUnavailable", testClosed},
		// The outbound sender's pushes (pushes.go).
		{"PushRoundTrip", testPushRoundTrip},
		{"PushCompareAndSet", testPushCompareAndSet},
		{"PushConcurrentClaimsOneWinner", testPushConcurrentClaims},
		{"PushUpdatesInOneCall", testPushUpdates},
		{"PushDueIndex", testPushDue},
		{"PushListPaging", testPushList},
		{"PushTTLExpiry", testPushTTL},
		{"PushInvalidInputRejected", testPushInvalid},
		{"PushClosedStoreUnavailable", testPushClosed},
		// The push API's storage (tenancy.go).
		{"PushesByKey", testPushesByKey},
		{"PushesByKeyExpire", testPushesByKeyExpire},
		{"CountOpen", testCountOpen},
		{"CountOpenUneven", testCountOpenUneven},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"IdempotencyKeysOneWinner", testIdempotencyOneWinner},
		{"TenancyClosedStoreUnavailable", testTenancyClosed},
		// The sender's rate shares (rateshares.go).
		{"RateSharesCompareAndSet", testRateShares},
		{"RateSharesOneWinner", testRateSharesOneWinner},
		{"RateSharesInvalidInputRejected", testRateSharesInvalid},
		// Tracked messages' fates, milestones and receipts (fates.go).
		{"FateRoundTrip", testFateRoundTrip},
		{"FateInvalidInputRejected", testFateInvalid},
		{"FateReach", testFateReach},
		{"FateReachAll", testFateReachAll},
		{"FateDeleteDelivered", testFateDeleteDelivered},
		{"FateSettleOneWinner", testFateSettleOneWinner},
		{"FateSettleUser", testFateSettleUser},
		{"FateSettleTopic", testFateSettleTopic},
		{"FateSettleExpired", testFateSettleExpired},
		{"FateAckGrace", testFateAckGrace},
		{"FateAckGraceReceived", testFateAckGraceReceived},
		{"ReceiptHooks", testReceiptHooks},
		{"CountReceiptHooks", testCountReceiptHooks},
		{"FateSettleExpiredConcurrent", testFateSettleExpiredConcurrent},
		{"FateMilestoneCounts", testFateMilestoneCounts},
		{"FateConservation", testFateConservation},
		{"FateLiveCounts", testFateLiveCounts},
		{"FateLiveCountsConcurrent", testFateLiveCountsConcurrent},
		{"FateTrackedMessage", testTrackedMessage},
		{"ReceiptSubs", testReceiptSubs},
		{"Receipts", testReceipts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h.New(t))
		})
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantKind(t testing.TB, err, kind error, what string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, kind)
	}
}

// nowMS is the millisecond clock connections are stamped with.
func nowMS() int64 { return time.Now().UnixMilli() }

func user(uaid uuid.UUID, node string, connectedAt int64) storage.User {
	return storage.User{UAID: uaid, RouterType: storage.RouterWebPush, NodeID: node, ConnectedAt: connectedAt}
}

// msg builds a timestamp message received now with a one-hour TTL.
func msg(chid uuid.UUID, data string) storage.Message {
	k := storage.NewSortKey()
	return storage.Message{
		CHID: chid, Version: fmt.Sprintf("v%d", k), SortKey: k, TTL: 3600, Data: data,
		Headers: map[string]string{"encoding": "aes128gcm"},
	}
}

func topicMsg(chid uuid.UUID, topic, data string) storage.Message {
	m := msg(chid, data)
	m.Topic = topic
	return m
}

func saveAll(t testing.TB, s storage.Store, uaid uuid.UUID, ms ...storage.Message) {
	t.Helper()
	for i := range ms {
		must(t, s.SaveMessage(ctx(t), uaid, ms[i]), "save message")
	}
}

// versions lists the Version of each message, the identity tests compare.
func versions(ms []storage.Message) []string {
	out := make([]string, len(ms))
	for i := range ms {
		out[i] = ms[i].Version
	}
	return out
}

func sameList(t testing.TB, got, want []string, what string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func fetchAll(t testing.TB, s storage.Store, uaid uuid.UUID, after uint64, page int) []storage.Message {
	t.Helper()
	var all []storage.Message
	for {
		got, err := s.TimestampMessages(ctx(t), uaid, after, page)
		must(t, err, "timestamp messages")
		all = append(all, got...)
		if len(got) < page {
			return all
		}
		after = got[len(got)-1].SortKey
	}
}
